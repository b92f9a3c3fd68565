"""Compaction of rows whose attributes are megabytes: bounded memory, and merged all the same."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa

from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA

DAY_START = 1_764_504_000_000_000  # µs


def _wide_row(i: int, megabytes: int) -> pa.Table:
    """One event whose attrs hold a string of `megabytes` MB."""
    blob = chr(97 + i % 26) * (megabytes << 20)
    return pa.Table.from_pylist([{
        "ts": DAY_START + i, "event": "deliver", "job_id": f"wide-{i}", "job_type": "t",
        "event_uid": f"wide-{i}", "attrs": json.dumps({"blob": blob}),
    }], schema=EVENTS_SCHEMA)


def _resident_mb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 >> 20


class _PeakRss:
    """The highest RSS seen while the with block runs (sampled every 20 ms), in MB."""

    def __enter__(self) -> _PeakRss:
        self.start = self.peak = _resident_mb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, _resident_mb())

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _attr_lengths(store: EmbeddedStore) -> dict[str, int]:
    frame = store.execute("SELECT job_id, length(attrs) AS n FROM events")
    return dict(zip(frame["job_id"], frame["n"], strict=True))


def test_thirty_rows_of_10_mb_attrs_are_compacted_in_bounded_memory(tmp_path: Path) -> None:
    # 300 MB of rows: DuckDB, which cannot spill rows this wide, ran out of its 256 MB.
    store = EmbeddedStore(tmp_path / "store")
    for i in range(30):
        store.write_hot(_wide_row(i, 10))
    with _PeakRss() as rss:
        assert store.compact(min_segments=2) == 30
    assert {p.suffix for p in store.segments()} == {".parquet"}
    assert rss.peak - rss.start < 350, f"compaction grew RSS by {rss.peak - rss.start} MB"
    lengths = _attr_lengths(store)
    assert len(lengths) == 30 and min(lengths.values()) > 10 << 20
    started = time.monotonic()
    assert store.compact(min_segments=2) == 0  # nothing left to merge, nothing retried
    assert time.monotonic() - started < 5


def test_a_segment_too_large_to_merge_in_memory_is_merged_all_the_same(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store", compaction_memory="32MB")
    store.write_hot(pa.concat_tables([_wide_row(0, 24), _wide_row(1, 24)]))
    for i in range(2, 6):
        store.write_hot(_wide_row(i, 0))  # small rows, merged as ever
    store.compact(min_segments=2)
    assert {p.suffix for p in store.segments()} == {".parquet"}
    assert len(_attr_lengths(store)) == 6  # acknowledged rows, all still read
    assert store.compact(min_segments=2) == 0  # nothing left over to merge again
