"""The collector compacts the embedded store in the background while it receives."""

from __future__ import annotations

import time
from pathlib import Path

from collect_support import post, running
from rows_support import many_rows

from queries import timeline
from store.embedded import EmbeddedStore


def _batch(i: int) -> bytes:
    return (
        b'{"ts": 1760000000.%03d, "event": "deliver", "job_id": "j%d", "job_type": "t", '
        b'"idempotency_key": "k%d", "worker_id": "w"}\n' % (i, i, i)
    )


def test_small_segments_are_merged_while_collecting(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    # A round may come between two commits (on a busy machine) and close the log they go
    # to; with a round merging whatever is hot, every commit still ends up merged.
    with running(store, compact_every=0.2, compact_min_segments=1) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        for i in range(8):  # one request at a time: one commit (a hot log's frame) each
            status, _, _ = post(url, _batch(i), "application/x-ndjson")
            assert status == 200
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
            path.suffix != ".parquet" for path in store.segments()
        ):
            time.sleep(0.1)
        suffixes = [path.suffix for path in store.segments()]
        assert set(suffixes) == {".parquet"}
        assert len(suffixes) < 8
    assert len(timeline(store, "k5")) == 1
    assert int(store.execute("SELECT count(*) AS n FROM events")["n"][0]) == 8


def test_background_compaction_can_be_turned_off(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, compact_every=0) as collector:
        assert collector.compactor is None
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        for i in range(3):
            post(url, _batch(i), "application/x-ndjson")
    assert [path.suffix for path in store.segments()] == [".arrowlog"]
    assert int(store.execute("SELECT count(*) AS n FROM events")["n"][0]) == 3


def test_stopping_the_compactor_interrupts_a_merge_under_way(tmp_path: Path) -> None:
    from collectors.service.compaction import Compactor

    store = EmbeddedStore(tmp_path / "store")
    rows = many_rows(500_000)
    store.write(rows)
    store.write(rows)
    compactor = Compactor(store, interval=0.01, min_segments=2).start()
    deadline = time.monotonic() + 30
    while store._merging is None and time.monotonic() < deadline:
        time.sleep(0.01)
    compactor.stop()
    assert len(store.segments()) == 2  # not merged: stopped part way
    assert not list(store.events_dir.rglob("*.tmp"))
