"""The lookup index: which row groups of which compacted segments hold a key or a job_id.

A compacted day is sorted by (idempotency_key, job_id, ts), but every day spans the whole
alphabet of keys, so min/max statistics alone still make a lookup open every day's file:
its cost grows with the number of days kept. The index turns a lookup into one small read:

- per day, `index/day=YYYY-MM-DD.parquet`: each distinct idempotency_key and job_id of the
  day's compacted segments (one column, `lookup`) -> (`segment`, `row_group`), with the
  segments it covers in the file's metadata. Written when the day is merged, replaced when
  it is merged again (keeping the entries of segments not merged again), moved to
  `.trash/` with the day by retention.
- global, `index/lookup-<generation>.parquet`: every day index merged, sorted by `lookup`,
  in small row groups, so a probe bisects the row groups' min/max (read once per
  generation) and decodes one row group. Written atomically (temporary name, fsync,
  rename); readers take the newest generation, older ones go to `.trash/`. Merging it
  reads every day kept, so a collector does it at most every 10 minutes; readers take the
  day indexes written since beside it (`current_indexes`).

Row groups rather than whole segments are named because decoding is the cost: a 4-8k row
group of all columns decodes in 1-2 ms, a whole day's file in ~100 ms. The indexes record
which segments they cover; a reader scans only listed segments none covers (recent
writes, a merge under way), so the index can lag but never hide a row.

Each index file names in its metadata a membership filter written beside it
(`store/membership_filter.py`): a value the filter rules out is not looked for in the
file's row groups, so a batch of new keys decodes none of them.
"""

from __future__ import annotations

import bisect
import json
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store import memory
from store.arrow_values import string, strings
from store.durable import place, temporary_for
from store.membership_filter import (
    SUFFIX,
    MembershipFilter,
    filter_name,
    value_hashes,
    write_filter_of_hashes,
)
from store.sql_files import literal, read

INDEX_SCHEMA = pa.schema(
    [
        pa.field("lookup", pa.string(), nullable=False),
        pa.field("segment", pa.string(), nullable=False),  # "day=YYYY-MM-DD/<name>.parquet"
        pa.field("row_group", pa.int32(), nullable=False),
    ]
)
INDEX_ROW_GROUP = 4096
COVERS = b"dupescope.covers"  # metadata key: JSON list of the segments an index file covers
FILTER = b"dupescope.filter"  # metadata key: the name of the index file's membership filter
GLOBAL_PREFIX = "lookup-"
_SQL = Path(__file__).parent / "sql"
#: Tries of an index merge, the memory limit doubled after each that ran out of it.
MERGE_ATTEMPTS = 4
#: Hashes fetched at once while the global index's filter is built.
_CHUNK = 1 << 20


def segment_name(path: Path) -> str:
    """A segment's name relative to `events/`: the key both index levels use."""
    return f"{path.parent.name}/{path.name}"


def covered_by(path: Path) -> set[str]:
    """The segments an index file (day or global) covers."""
    metadata = pq.read_schema(path).metadata or {}
    return set(json.loads(metadata.get(COVERS, b"[]")))


def segment_entries(path: Path) -> pa.Table:
    """Distinct (lookup, segment, row_group) of one segment's keys and job_ids.

    Read a row group at a time: the two columns of a whole compacted day (10M events)
    and their grouping held 1 GB beside a compaction under a 1 GB budget; a group's
    values are a few MB, and what is kept is what the index holds."""
    handle = pq.ParquetFile(path)
    name = segment_name(path)
    parts = [pa.Table.from_batches([], schema=INDEX_SCHEMA)]
    for group in range(handle.metadata.num_row_groups):
        columns = handle.read_row_group(group, columns=["idempotency_key", "job_id"],
                                        use_threads=False)
        values = pa.chunked_array(
            columns["idempotency_key"].chunks + columns["job_id"].chunks, pa.string())
        lookups = pc.unique(pc.drop_null(values))
        parts.append(pa.table(
            {
                "lookup": lookups,
                "segment": pa.array([name] * len(lookups), pa.string()),
                "row_group": pa.array(np.full(len(lookups), group, dtype=np.int32)),
            },
            schema=INDEX_SCHEMA,
        ))
    return pa.concat_tables(parts)


def write_day_index(
    index_dir: Path, day: str, segments: list[Path], memory_limit: str, spill: Path
) -> Path:
    """The day's index over its (compacted) segments, replacing the previous one. The
    entries of segments the previous one covered are taken from it: only new segments are
    read (a row group at a time, staged in `spill`), not the whole day again."""
    index_dir.mkdir(parents=True, exist_ok=True)
    final = index_dir / f"day={day}.parquet"
    names = [segment_name(p) for p in segments]
    known = covered_by(final) & set(names) if final.exists() else set()
    spill.mkdir(parents=True, exist_ok=True)  # the entries are staged there
    staged = spill / f"entries-{uuid.uuid4().hex[:12]}.parquet"
    try:
        with pq.ParquetWriter(staged, INDEX_SCHEMA) as writer:
            for path in segments:
                if segment_name(path) not in known:
                    writer.write_table(segment_entries(path))
        _write_merged([staged, *([final] if known else [])], names, final, memory_limit,
                      spill)
    finally:
        staged.unlink(missing_ok=True)
    return final


def write_global_index(
    index_dir: Path, generation: str, memory_limit: str, spill: Path
) -> Path | None:
    """Merge every day index into one file sorted by `lookup`; None when there is none."""
    days = sorted(index_dir.glob("day=*.parquet"))
    if not days:
        return None
    covers: set[str] = set()
    for day in days:
        covers |= covered_by(day)
    final = index_dir / f"{GLOBAL_PREFIX}{generation}.parquet"
    _write_merged(days, sorted(covers), final, memory_limit, spill)
    return final


def _write_merged(
    files: list[Path], covers: list[str], final: Path, memory_limit: str, spill: Path
) -> None:
    """`_write_merged_within` the limit, or within twice, four and eight times it where
    DuckDB's sort runs out of it (the least a sort of many entries needs is not known
    before), rather than leave a day without its index."""
    limit = memory.size(memory_limit)
    for attempt in range(MERGE_ATTEMPTS):
        try:
            _write_merged_within(files, covers, final, f"{(limit << attempt) // 1024**2}MB",
                                 spill)
            return
        except duckdb.OutOfMemoryException:
            if attempt == MERGE_ATTEMPTS - 1:
                raise


def _write_merged_within(
    files: list[Path], covers: list[str], final: Path, memory_limit: str, spill: Path
) -> None:
    """The entries of index files `files` that name one of `covers`, as the index file
    `final` sorted by `lookup`, after the membership filter it names.

    DuckDB sorts them within `memory_limit` (spilling to `spill`) and writes the file,
    and the filter is built from their hashes a chunk at a time: held and sorted in this
    process, the entries of a 10M-event day took a 1 GB compaction to 1.3 GB."""
    name = filter_name(final)
    params = {"files": [str(p) for p in files], "segments": sorted(covers)}
    spill.mkdir(parents=True, exist_ok=True)
    # One thread: each thread's share of a small limit is too little for its sort runs
    # (two threads ran out of 64 MB sorting 1.2M entries that one thread sorts in 32 MB).
    con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(spill),
                                 "threads": 1})
    try:
        [(count,)] = con.execute(read(_SQL, "lookup_index_count", "duckdb"), params).fetchall()
        hashes = con.sql(read(_SQL, "lookup_index_hashes", "duckdb"), params=params)
        write_filter_of_hashes(
            final.parent / name, int(count),
            (batch.column(0).to_numpy() for batch in hashes.to_arrow_reader(_CHUNK)))
        temporary = temporary_for(final)
        metadata = {COVERS.decode(): json.dumps(sorted(covers)), FILTER.decode(): name}
        kv = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in metadata.items())
        con.execute(
            f"COPY ({read(_SQL, 'lookup_index_merge', 'duckdb')}) "
            f"TO {literal(str(temporary))} "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {INDEX_ROW_GROUP}, "
            f"KV_METADATA {{{kv}}})",
            params,
        )
    except BaseException:
        # What the failed try wrote; its filter, named by no index, goes with the
        # compaction's `remove_unnamed_filters`.
        temporary_for(final).unlink(missing_ok=True)
        raise
    finally:
        con.close()
    place(temporary, final)


def filter_of(path: Path, metadata: dict[bytes, bytes] | None = None) -> Path | None:
    """The membership filter an index file names (from its metadata, read if not given),
    if it names one."""
    if metadata is None:
        metadata = pq.read_schema(path).metadata
    name = (metadata or {}).get(FILTER)
    return path.parent / name.decode() if name else None


def remove_unnamed_filters(index_dir: Path) -> int:
    """Delete the filters no index file in `index_dir` names any more (those of replaced
    day indexes and of generations moved to the trash); returns how many. A reader that
    still has one open keeps its mapping; one that opens it too late does without."""
    if not index_dir.exists():
        return 0
    named = set()
    for index in index_dir.glob("*.parquet"):
        try:
            named.add(filter_of(index))
        except FileNotFoundError:  # replaced meanwhile: its successor names a newer filter
            continue
    removed = 0
    for path in index_dir.glob(f"*{SUFFIX}"):
        if path not in named:
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def global_indexes(index_dir: Path) -> list[Path]:
    """Every global generation on disk, oldest first."""
    if not index_dir.exists():
        return []
    return sorted(p for p in index_dir.glob(f"{GLOBAL_PREFIX}*.parquet"))


def current_indexes(index_dir: Path) -> list[Path]:
    """What a reader consults: the newest global generation, then the day indexes written
    since it (or every day index, without one). A day compacted after the last global
    merge is found through its own index, so the global one may be merged seldom."""
    generations = global_indexes(index_dir)
    days = sorted(index_dir.glob("day=*.parquet")) if index_dir.exists() else []
    if not generations:
        return days
    newest = generations[-1]
    since = newest.stat().st_mtime_ns  # a day written in the same clock tick is taken too
    return [newest, *(p for p in days if p.stat().st_mtime_ns >= since)]


class LookupIndex:
    """One index file (a global generation or a day's), opened by a reader: bisects
    row-group bounds, reads one group."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = pq.ParquetFile(path)
        metadata = self._file.metadata
        self.covers = set(json.loads((metadata.metadata or {}).get(COVERS, b"[]")))
        self._mins: list[str] = []
        self._maxs: list[str] = []
        column = self._file.schema_arrow.get_field_index("lookup")
        for i in range(metadata.num_row_groups):
            stats = metadata.row_group(i).column(column).statistics
            if stats is None or not stats.has_min_max:
                raise ValueError(f"{path}: row group {i} has no lookup statistics")
            self._mins.append(stats.min)
            self._maxs.append(stats.max)
        self._groups: dict[int, pa.Table] = {}
        named = filter_of(path, metadata.metadata or {})
        self.filter = MembershipFilter.open(named) if named else None

    def _group(self, i: int) -> pa.Table:
        if i not in self._groups:
            if len(self._groups) >= 256:
                self._groups.pop(next(iter(self._groups)))
            self._groups[i] = self._file.read_row_group(i, use_threads=False)
        return self._groups[i]

    def find(
        self, values: Iterable[str], hashes: np.ndarray | None = None
    ) -> set[tuple[str, int]]:
        """(segment, row_group) pairs holding any of `values` as a key or a job_id.

        Values the membership filter rules out are dropped first (`hashes`, from
        `value_hashes`, may be given in the values' order). The rest are sorted into the
        index row groups whose bounds hold them, and each such group is searched once for
        all of its values: a batch's thousands of keys cost the groups they fall in, not a
        search each."""
        if self.filter is not None:
            values = list(values)
            if hashes is None:
                hashes = value_hashes(values)
            held = self.filter.may_hold(hashes)
            values = [v for v, h in zip(values, held.tolist(), strict=True) if h]
        wanted: dict[int, list[str]] = {}
        for value in values:
            i = bisect.bisect_left(self._maxs, value)
            while i < len(self._mins) and self._mins[i] <= value:
                wanted.setdefault(i, []).append(value)
                i += 1
        found: set[tuple[str, int]] = set()
        for i, group_values in wanted.items():
            group = self._group(i)
            if len(group_values) == 1:
                hits = group.filter(pc.equal(group["lookup"], string(group_values[0])))
            else:
                hits = group.filter(pc.is_in(group["lookup"], strings(group_values)))
            found.update(zip(hits["segment"].to_pylist(), hits["row_group"].to_pylist(),
                             strict=True))
        return found

    def close(self) -> None:
        self._file.close()
        self.filter = None


class IndexSet:
    """Several open index files as one: what any of them covers and finds."""

    def __init__(self, indexes: list[LookupIndex]) -> None:
        self.indexes = indexes
        self.covers: set[str] = set().union(*(index.covers for index in indexes))

    def find(self, values: Iterable[str]) -> set[tuple[str, int]]:
        values = list(values)
        filtered = any(index.filter is not None for index in self.indexes)
        hashes = value_hashes(values) if filtered and values else None
        return set().union(*(index.find(values, hashes) for index in self.indexes))
