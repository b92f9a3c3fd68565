"""A segment's lookup entries name each key and job_id in exactly the row groups that
hold it, read a row group at a time; the global index merges the days' entries sorted,
with a membership filter of every one, within a memory budget."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from store import lookup_index
from store.lookup_index import (
    INDEX_SCHEMA,
    covered_by,
    filter_of,
    segment_entries,
    segment_name,
    write_day_index,
    write_global_index,
)
from store.membership_filter import MembershipFilter, value_hashes


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


def _day(events: Path, day: str, keys: list[str]) -> Path:
    folder = events / f"day={day}"
    folder.mkdir(parents=True)
    path = folder / "segment.parquet"
    pq.write_table(pa.table({"idempotency_key": pa.array(keys, pa.string()),
                             "job_id": pa.array([f"job-{k}" for k in keys], pa.string())}),
                   path, row_group_size=64)
    return path


def test_the_global_index_merges_the_days_sorted_and_filtered_within_its_budget(
    tmp_path,
) -> None:
    index_dir = tmp_path / "index"
    first = [f"a-{i:05d}" for i in range(0, 6000, 2)]
    second = [f"a-{i:05d}" for i in range(3001, 6000, 2)]
    segments = [_day(tmp_path / "events", "2026-12-05", first),
                _day(tmp_path / "events", "2026-12-06", second)]
    for segment in segments:
        write_day_index(index_dir, segment.parent.name.removeprefix("day="), [segment],
                        "64MB", tmp_path / "spill")
    path = write_global_index(index_dir, "1", "64MB", tmp_path / "spill")
    assert path is not None
    merged = pq.read_table(path)
    lookups = merged["lookup"].to_pylist()
    assert lookups == sorted(lookups) and len(lookups) == 2 * (len(first) + len(second))
    assert covered_by(path) == {segment_name(s) for s in segments}
    named = filter_of(path)
    assert named is not None
    opened = MembershipFilter.open(named)
    assert opened is not None
    assert opened.may_hold(value_hashes(first + second + [f"job-{k}" for k in first])).all()
    absent = [f"b-{i}" for i in range(5000)]
    assert opened.may_hold(value_hashes(absent)).mean() < 0.02


def test_a_day_index_keeps_the_entries_of_segments_it_still_covers_and_drops_the_rest(
    tmp_path, monkeypatch,
) -> None:
    index_dir, spill = tmp_path / "index", tmp_path / "spill"
    old = _day(tmp_path / "events", "2026-12-06", ["k1", "k2"])
    new = old.with_name("later.parquet")
    pq.write_table(pa.table({"idempotency_key": pa.array(["k3"], pa.string()),
                             "job_id": pa.array(["job-k3"], pa.string())}), new)
    path = write_day_index(index_dir, "2026-12-06", [old], "64MB", spill)
    read = []
    monkeypatch.setattr(lookup_index, "segment_entries",
                        lambda p: read.append(p.name) or segment_entries(p))
    write_day_index(index_dir, "2026-12-06", [old, new], "64MB", spill)
    assert read == ["later.parquet"]  # the old segment's entries came from the index
    assert sorted(pq.read_table(path)["lookup"].to_pylist()) == [
        "job-k1", "job-k2", "job-k3", "k1", "k2", "k3"]
    write_day_index(index_dir, "2026-12-06", [new], "64MB", spill)
    assert sorted(pq.read_table(path)["lookup"].to_pylist()) == ["job-k3", "k3"]
    assert covered_by(path) == {segment_name(new)}


def test_an_index_merge_that_runs_out_of_its_limit_is_tried_again_with_twice_as_much(
    tmp_path, monkeypatch,
) -> None:
    segment = _day(tmp_path / "events", "2026-12-06", ["k1", "k2"])
    limits = []
    within = lookup_index._write_merged_within

    def short_of_memory_once(files, covers, final, memory_limit, spill) -> None:
        limits.append(memory_limit)
        if len(limits) == 1:
            raise duckdb.OutOfMemoryException("could not allocate")
        within(files, covers, final, memory_limit, spill)

    monkeypatch.setattr(lookup_index, "_write_merged_within", short_of_memory_once)
    path = write_day_index(tmp_path / "index", "2026-12-06", [segment], "64MB",
                           tmp_path / "spill")
    assert limits == ["64MB", "128MB"]
    assert sorted(pq.read_table(path)["lookup"].to_pylist()) == [
        "job-k1", "job-k2", "k1", "k2"]
