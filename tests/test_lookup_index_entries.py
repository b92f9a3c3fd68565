"""A segment's lookup entries name each key and job_id in exactly the row groups that
hold it, read a row group at a time."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from store.lookup_index import INDEX_SCHEMA, segment_entries


def _segment(folder: Path, keys: list[str | None], jobs: list[str | None]) -> Path:
    day = folder / "day=2026-12-06"
    day.mkdir(parents=True)
    path = day / "segment.parquet"
    table = pa.table({"idempotency_key": pa.array(keys, pa.string()),
                      "job_id": pa.array(jobs, pa.string())})
    pq.write_table(table, path, row_group_size=2)
    return path


def test_each_lookup_is_named_once_for_every_row_group_that_holds_it(tmp_path) -> None:
    path = _segment(tmp_path, ["k1", "k1", "k1", None, "k2"], ["j1", "j1", "j2", "j3", "j4"])
    entries = segment_entries(path)
    assert entries.schema == INDEX_SCHEMA
    found = sorted(zip(entries["lookup"].to_pylist(), entries["row_group"].to_pylist(),
                       strict=True))
    assert found == [("j1", 0), ("j2", 1), ("j3", 1), ("j4", 2), ("k1", 0), ("k1", 1),
                     ("k2", 2)]
    assert set(entries["segment"].to_pylist()) == {"day=2026-12-06/segment.parquet"}


def test_a_segment_of_no_keys_has_no_entries(tmp_path) -> None:
    entries = segment_entries(_segment(tmp_path, [None], [None]))
    assert entries.num_rows == 0 and entries.schema == INDEX_SCHEMA
