"""A reader's key lookup: the rows a timeline can need, without scanning the store.

The rows of a key are those with the key, plus every row of the key's job_ids (a job's
later events may not repeat the key, and may fall on another day). Two hops gather a
superset of them: the key's rows, then its jobs' rows. Each hop reads the row groups the
lookup index names in the segments it covers, plus a filtered scan of the listed segments
it does not cover. The caller then applies timeline.sql's exact filter, so the superset
only has to be complete, never exact.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store import compaction_journal
from store.arrow_values import strings
from store.hot_log import HotTables, is_hot
from store.lookup_index import IndexSet, LookupIndex, current_indexes
from store.schema import EVENTS_SCHEMA, empty_table
from store.segments import CHANGES, SEGMENT_SUFFIXES

# A folder's listing is reused while its mtime is unchanged, but only once the listing was
# taken this long after that mtime: a change in the same coarse clock tick as the mtime
# would not move it, a change after the listing always does.
SETTLE_NS = 1_000_000_000
RELIST_NS = 2_000_000_000
OPEN_FILES = 64
# Decoded row groups kept across lookups (~1 MB each at 4096 rows), bounded in bytes as a
# store compacted with bigger groups may hold some: segments are immutable and their names
# never reused, so a (segment, row group) never goes stale, and decoding was half of a
# repeated lookup.
DECODED_BYTES = 32 << 20


class DayListing:
    """Segments per day folder, re-listed only when the store changed.

    Listing every day folder costs a readdir per day kept; a day is re-listed only when its
    folder's mtime moved, and no day is looked at while the store's change file
    (`segments.CHANGES`) has not grown: one stat, however many days the store keeps. A
    full look every RELIST_NS covers a writer that died between placing a segment and
    noting it.
    """

    def __init__(self, events_dir: Path) -> None:
        self.events_dir = events_dir
        self._days: dict[str, tuple[int, int, tuple[str, ...]]] = {}
        self._listing: list[str] | None = None
        self._changes = -1
        self._listed_at = 0
        self.relisted = True  # whether the last `segments()` looked at the folders

    def forget(self) -> None:
        """The next `segments()` looks at the folders whatever the change file says."""
        self._listing = None

    def segments(self) -> list[str]:
        """Every segment as "day=YYYY-MM-DD/<name>.parquet" (or `.arrow`), sorted."""
        try:
            changes = os.stat(self.events_dir / CHANGES).st_size
        except FileNotFoundError:
            changes = -1
        now = time.monotonic_ns()
        if (
            self._listing is not None
            and changes >= 0
            and changes == self._changes
            and now - self._listed_at < RELIST_NS
        ):
            self.relisted = False
            return self._listing
        # The size is read before listing: a change made meanwhile shows at the next call.
        self._changes, self._listed_at, self.relisted = changes, now, True
        self._listing = self._list()
        return self._listing

    def _list(self) -> list[str]:
        if not self.events_dir.exists():
            return []
        found: list[str] = []
        present = set()
        with os.scandir(self.events_dir) as entries:
            for entry in entries:
                if not entry.name.startswith("day=") or not entry.is_dir():
                    continue
                present.add(entry.name)
                try:
                    mtime = entry.stat().st_mtime_ns
                    cached = self._days.get(entry.name)
                    if cached and cached[0] == mtime and cached[1] - mtime > SETTLE_NS:
                        names = cached[2]
                    else:
                        listed_at = time.time_ns()
                        in_day = os.listdir(entry.path)
                        hidden = compaction_journal.replaced(Path(entry.path), in_day)
                        names = tuple(sorted(
                            n for n in in_day if n.endswith(SEGMENT_SUFFIXES) and n not in hidden
                        ))
                        self._days[entry.name] = (mtime, listed_at, names)
                except FileNotFoundError:  # retention moved the day away meanwhile
                    continue
                found.extend(f"{entry.name}/{n}" for n in names)
        for gone in set(self._days) - present:
            del self._days[gone]
        return sorted(found)


def _matching(table: pa.Table, values: list[str]) -> pa.Table:
    """The rows whose idempotency_key or job_id is one of `values`."""
    value_set = strings(values)
    # is_in answers false, not null, for a null: no Kleene logic needed.
    keep = pc.or_(
        pc.is_in(table["idempotency_key"], value_set),
        pc.is_in(table["job_id"], value_set),
    )
    return table.filter(keep)


class KeyFinder:
    """Gathers a key's candidate rows for one reader; keeps the index and files open."""

    def __init__(self, events_dir: Path, index_dir: Path) -> None:
        self.events_dir = events_dir
        self.index_dir = index_dir
        self.listing = DayListing(events_dir)
        self._index: IndexSet | None = None
        # Open index files by (path, inode): a day's index is replaced under its name.
        self._opened: dict[tuple[Path, int], LookupIndex] = {}
        self._files: OrderedDict[str, pq.ParquetFile] = OrderedDict()
        self._groups: OrderedDict[tuple[str, int], pa.Table] = OrderedDict()
        self._group_bytes = 0
        self._con: duckdb.DuckDBPyConnection | None = None
        self._hot = HotTables()

    def _current_index(self) -> IndexSet | None:
        if self._index is not None and not self.listing.relisted:
            return self._index  # nothing changed since the last look (compaction notes it)
        wanted = {(path, path.stat().st_ino): path for path in current_indexes(self.index_dir)}
        for identity in set(self._opened) - set(wanted):
            self._opened.pop(identity).close()
        for identity, path in wanted.items():
            if identity not in self._opened:
                self._opened[identity] = LookupIndex(path)
        self._index = IndexSet([self._opened[i] for i in wanted]) if wanted else None
        return self._index

    def _drop_index(self) -> None:
        for index in self._opened.values():
            index.close()
        self._opened.clear()
        self._index = None

    def _file(self, segment: str) -> pq.ParquetFile:
        handle = self._files.pop(segment, None)
        if handle is None:
            handle = pq.ParquetFile(self.events_dir / segment)
            if len(self._files) >= OPEN_FILES:
                self._files.popitem(last=False)[1].close()
        self._files[segment] = handle
        return handle

    def _read_group(self, segment: str, group: int) -> pa.Table:
        part = self._groups.get((segment, group))
        if part is not None:
            self._groups.move_to_end((segment, group))
            return part
        handle = self._file(segment)
        part = handle.read_row_group(group, columns=EVENTS_SCHEMA.names, use_threads=False)
        part = part.cast(EVENTS_SCHEMA)
        self._groups[(segment, group)] = part
        self._group_bytes += part.nbytes
        while self._group_bytes > DECODED_BYTES and len(self._groups) > 1:
            self._group_bytes -= self._groups.popitem(last=False)[1].nbytes
        return part

    def _scan(self, segments: list[str], values: list[str]) -> list[pa.Table]:
        """The rows of `values` in segments the index does not cover: the hot ones mapped
        and filtered here, the Parquet ones read by DuckDB."""
        hot = [str(self.events_dir / s) for s in segments if is_hot(s)]
        found = [_matching(self._hot.table(hot), values)] if hot else []
        segments = [s for s in segments if not is_hot(s)]
        if not segments:
            return found
        if self._con is None:
            self._con = duckdb.connect()
            self._con.execute("SET TimeZone = 'UTC'")
        columns = ", ".join(EVENTS_SCHEMA.names)
        table = self._con.sql(
            f"SELECT {columns} FROM read_parquet($files, union_by_name = true, "
            f"hive_partitioning = false) "
            f"WHERE idempotency_key IN (SELECT unnest($values)) "
            f"OR job_id IN (SELECT unnest($values))",
            params={"files": [str(self.events_dir / s) for s in segments], "values": values},
        ).to_arrow_table()
        return [*found, table.cast(EVENTS_SCHEMA)]

    def _hop(
        self,
        values: list[str],
        index: IndexSet | None,
        listed: set[str],
        uncovered: list[str],
    ) -> pa.Table:
        groups: set[tuple[str, int]] = set()
        if index is not None:
            groups = {g for g in index.find(values) if g[0] in listed}
        found = [empty_table()]
        for segment, group in sorted(groups):
            found.append(_matching(self._read_group(segment, group), values))
        return pa.concat_tables(found + self._scan(uncovered, values))

    def rows(self, key: str) -> pa.Table:
        """A superset of the rows of `key`'s timeline: the key's, and its jobs' rows."""
        return self._retrying(lambda: self._rows(key))

    def rows_of(self, values: list[str]) -> pa.Table:
        """Every row whose idempotency_key or job_id is one of `values` (one hop)."""
        if not values:
            return empty_table()
        return self._retrying(lambda: self._rows_of(values))

    def _retrying(self, find: Callable[[], pa.Table]) -> pa.Table:
        for attempt in range(3):
            try:
                return find()
            except (FileNotFoundError, duckdb.IOException):
                # A segment listed a moment ago was compacted away: list again.
                self._close_files()
                self.listing.forget()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _rows_of(self, values: list[str]) -> pa.Table:
        segments = self.listing.segments()
        index = self._current_index()
        uncovered = [s for s in segments if index is None or s not in index.covers]
        return self._hop(values, index, set(segments), uncovered)

    def _rows(self, key: str) -> pa.Table:
        segments = self.listing.segments()
        index = self._current_index()
        listed = set(segments)
        uncovered = [s for s in segments if index is None or s not in index.covers]
        first = self._hop([key], index, listed, uncovered)
        keyed = first.filter(pc.is_in(first["idempotency_key"], strings([key])))
        jobs = sorted(set(pc.drop_null(keyed["job_id"]).to_pylist()) - {key})
        if not jobs:
            return first
        second = self._hop(jobs, index, listed, uncovered)
        return pa.concat_tables([first, second])

    def _close_files(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
        self._hot.clear()
        self._groups.clear()
        self._group_bytes = 0

    def close(self) -> None:
        self._close_files()
        self._drop_index()
        if self._con is not None:
            self._con.close()
            self._con = None
