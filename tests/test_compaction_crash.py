"""A compaction killed at any point loses no event and doubles none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from rows_support import many_rows

from store import compaction_journal
from store.durable import temporary_for
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]


def _counts(store: EmbeddedStore) -> list[int]:
    frame = store.execute("SELECT count(*) AS n, count(DISTINCT event_uid) AS d FROM events")
    return [int(frame["n"][0]), int(frame["d"][0])]


def test_sigkill_during_the_compaction_after_ingest_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path / "store")
    rows = many_rows(400_000)
    for part in range(4):
        store.write(rows.slice(part * 100_000, 100_000))
    store.write(rows.slice(0, 100_000))  # a resend
    line = {"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": "late", "job_type": "t"}
    log = tmp_path / "late.jsonl"
    log.write_text(json.dumps(line) + "\n")
    child = subprocess.Popen(
        [sys.executable, "-m", "dupescope.cli", "--store", str(store.root), "ingest", "-q",
         str(log)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while child.poll() is None and time.monotonic() < deadline:
        placed = len(list(store.events_dir.glob("day=*/*.parquet")))
        if placed >= 6 and list(store.events_dir.glob("day=*/*.tmp")):  # a merge under way
            os.kill(child.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    child.wait()
    assert child.returncode == -signal.SIGKILL  # killed part way, not finished
    store.forget_snapshot()
    rows_read, events = _counts(store)
    assert events == 400_001  # none lost
    # None doubled: at most the five segments as written (the resend is one until merged),
    # never a merged output beside the inputs it holds.
    assert rows_read in (500_001, 400_001)
    store.compact()
    store.forget_snapshot()
    assert _counts(store) == [400_001, 400_001]
    assert len(store.segments()) == 1


def test_a_merge_placed_but_not_cleared_away_is_read_once(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    rows = many_rows(1_000)
    store.write(rows.slice(0, 600))
    store.write(rows.slice(400, 600))
    inputs = store.segments()
    folder = inputs[0].parent
    merged = folder / "99999999999999999999-merged.parquet"
    # What a compaction killed between placing its output and moving its inputs leaves.
    compaction_journal.begin(folder, merged.name, inputs)
    uids = pc.unique(pc.drop_null(store.arrow("SELECT * FROM events")["event_uid"]))
    table = store.arrow("SELECT DISTINCT ON (event_uid) * FROM events ORDER BY event_uid")
    assert table.num_rows == len(uids) == 1_000
    pq.write_table(table, temporary_for(merged))
    os.rename(temporary_for(merged), merged)
    store.forget_snapshot()
    assert store.segments() == [merged]
    assert _counts(store) == [1_000, 1_000]
    store.compact()
    assert not list(folder.glob(f"{compaction_journal.PREFIX}*"))
    assert [p.name for p in folder.iterdir() if p.suffix == ".parquet"] != []
    store.forget_snapshot()
    assert _counts(store) == [1_000, 1_000]
