"""The embedded default: a folder of immutable Parquet segments, read through DuckDB.

A DuckDB database file cannot be shared by a writing and a reading process, so the writer
(ingest, the collector) adds immutable segments `events/day=YYYY-MM-DD/<id>.parquet`, each
written under a temporary name, fsynced and renamed; readers (CLI, dashboard, alerts) query
the set of segments they listed, in their own in-process DuckDB. A collector appends its
commits to hot logs instead (`<id>.arrowlog`, frames of Arrow IPC: `store/hot_log.py`; a
commit too large for that, a hot segment `<id>.arrow`: `store/hot_segments.py`), which
readers map into memory beside the Parquet segments. Compaction merges a day's new
segments into one, without repeats and sorted by (idempotency_key, job_id, ts) in small
row groups, merges compacted segments of one size tier four at a time, and indexes them
(`store/lookup_index.py`) so that a key lookup reads a few row groups instead of every
day; replaced segments move to `.trash/` and are deleted later, so a reader that listed
them a moment ago can still finish."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from store import compaction_journal, compaction_runs, memory
from store.base import SegmentedStore, StoreError, to_frame
from store.durable import fsync_dir, place, temporary_for
from store.hot_log import HotLogs, HotTables, frame_count, is_hot, is_log, is_open, read_hot, sizes
from store.hot_segments import SpareFiles
from store.key_lookup import KeyFinder
from store.lineage import LINEAGE, Changes, inputs_of, since
from store.lookup_index import (
    covered_by,
    global_indexes,
    remove_unnamed_filters,
    write_day_index,
    write_global_index,
)
from store.schema import EVENTS_SCHEMA
from store.segments import SEGMENT_SUFFIXES, SegmentWriter, _segment_name, note_change
from store.spill import spill_folder

if TYPE_CHECKING:  # frames are made by `to_frame`, which imports pandas when first asked:
    import pandas as pd  # `dupescope ingest` makes none, nor do its workers

# Compacted segments: a key lookup decodes whole row groups, ~1.5 ms at this size against
# ~100 ms at segments.SEGMENT_ROW_GROUP; full scans pay ~1.5x for it.
COMPACTED_ROW_GROUP = 4096
TRASH_GRACE_SECONDS = 300.0
#: Compaction merges segments in tiers: this many compacted segments of one tier make one
#: of the next. Tier 0 holds segments under TIER_BASE_ROWS rows, tier n under
#: TIER_BASE_ROWS * MERGE_FANOUT ** n. So each row is rewritten about once per tier, and a
#: round costs what arrived since the last one, not the whole day so far.
MERGE_FANOUT = 4
TIER_BASE_ROWS = 65_536
#: A compacted segment this large is not merged again (a key lookup opens one row group of
#: it through the index, however many segments the day has).
SETTLED_ROWS = 16_000_000
#: What DuckDB may hold while it merges (sorting, dropping repeats) is a share of the
#: memory budget (`store/memory.py`); beyond it, it spills to `<store>/.compaction-spill`.
#: Unbounded, merging 1.6M rows took 5.4 GB.
#: A compacted row group ends at this many bytes too: the Parquet writer holds a row group
#: until it is complete, and 4096 rows of 10 MB attributes would have been 40 GB.
COMPACTED_ROW_GROUP_BYTES = "16MB"
#: DuckDB spills a merge's sort to disk in blocks, but not rows of large values: 30 rows of
#: 10 MB attributes (300 MB) ran out of its 256 MB, and so did 30,000 of 10 KB, where
#: 300,000 of 1 KB spilled and merged. Rows above WIDE_ROW_BYTES on average are merged
#: at most WIDE_MERGE_BYTES of them at a time (several compacted segments), and compacted
#: segments of them are not merged again. In a collector receiving 10 MB bodies while it
#: compacted 30 such rows, peak RSS was 721 MB merging 64 MB at a time on two threads, and
#: ~600 MB merging 32 MB on one.
WIDE_ROW_BYTES = 4096
WIDE_MERGE_BYTES = 32 * 1024 * 1024

log = logging.getLogger("dupescope.store")


def _segments_in(paths: Iterable[Path]) -> Iterator[Path]:
    """The segments among a day folder's entries (not temporaries, not other files)."""
    return (p for p in paths if p.suffix in SEGMENT_SUFFIXES)


def _digest(segments: Iterable[Path], log_sizes: Iterable[int] = ()) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for segment in segments:
        digest.update(segment.name.encode())
    for size in log_sizes:  # a hot log grows under the same name
        digest.update(size.to_bytes(8, "little"))
    return digest.hexdigest()


class EmbeddedStore(SegmentedStore):
    """Parquet segments + DuckDB. Safe for one writer process and any number of readers."""

    dialect = "duckdb"

    def __init__(
        self,
        root: str | Path,
        compaction_memory: str | None = None,
        wide_merge_bytes: int = WIDE_MERGE_BYTES,
    ) -> None:
        self.root = Path(root)
        # DuckDB's memory_limit for a merge: a share of the budget (store/memory.py)
        self.compaction_memory = compaction_memory or memory.compaction_limit()
        self.wide_merge_bytes = wide_merge_bytes  # bytes of wide rows merged at once
        self.events_dir = self.root / "events"
        self.trash_dir = self.root / ".trash"
        self.index_dir = self.root / "index"
        self._spill_dir = self.root / ".compaction-spill"  # where a merge's DuckDB spills
        self._merging: duckdb.DuckDBPyConnection | None = None  # a merge under way
        self._interrupted = threading.Event()
        self._lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._snapshot: tuple[str, ...] | None = None
        self._log_sizes: tuple[int, ...] = ()  # of the hot logs in the snapshot, as read
        # The segments and hot log sizes the `events` view reads (None: none, or stale).
        self._viewed: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._finder: KeyFinder | None = None
        self._hot = HotTables()
        self._hot_table: pa.Table | None = None
        self._spares: SpareFiles | None = None
        self._logs: HotLogs | None = None

    # ---- writing -------------------------------------------------------------------

    def write(self, table: pa.Table) -> int:
        """Write one segment per UTC day present in the batch; durable on return."""
        return self.segment_writer().write(table)

    def write_hot(self, table: pa.Table) -> int:
        """`write` for a small batch that compaction will soon rewrite (a collector's group
        commit): a frame of each day's hot log, durable on return (`store/hot_log.py`)."""
        if self._logs is None:
            self._spares = SpareFiles(self.events_dir / ".spare")
            self._logs = HotLogs(self._spares)
        return SegmentWriter(
            self.events_dir, hot=True, spares=self._spares, logs=self._logs
        ).write(table)

    def segment_writer(self) -> SegmentWriter:
        """What `write` does, as a small value another process can run (ingest's workers)."""
        return SegmentWriter(self.events_dir)

    # ---- reading -------------------------------------------------------------------

    def segments(self) -> list[Path]:
        """Every segment, Parquet and hot, in order of arrival within each day."""
        if not self.events_dir.exists():
            return []
        entries = compaction_journal.without_replaced(list(self.events_dir.glob("day=*/*")))
        return sorted(_segments_in(entries))

    def days(self) -> list[str]:
        if not self.events_dir.exists():
            return []
        return sorted(p.name.removeprefix("day=") for p in self.events_dir.glob("day=*"))

    def snapshot_id(self) -> str:
        """Changes whenever the segments change (a hot log grows): a cache key for derived
        data."""
        segments = self.segments()
        return _digest(segments, sizes([str(p) for p in segments]))

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = duckdb.connect(
                config={"temp_directory": spill_folder(), "memory_limit": memory.reader_limit()}
            )
            self._con.execute("SET TimeZone = 'UTC'")
            self._con.execute("SET parquet_metadata_cache = true")
        return self._con

    def _refresh(self, events: bool = True) -> None:
        """Pin the segments there are now; with `events`, make the `events` view read
        exactly those. Binding the view reads the footer of every Parquet segment (0.7 s
        over the 800 segments of 100M events), which a reader of derived tables alone
        need not pay."""
        for attempt in range(3):
            files = tuple(str(p) for p in self.segments())
            log_sizes = sizes(list(files))
            self._snapshot, self._log_sizes = files, log_sizes
            if not events or self._viewed == (files, log_sizes):
                return
            try:
                self._view(files, self._hot.table([f for f in files if is_hot(f)]))
            except (FileNotFoundError, duckdb.IOException):
                if attempt == 2:  # compacted away as it was listed: list again
                    raise
                continue
            self._viewed = (files, log_sizes)
            return

    def _view(self, files: tuple[str, ...], hot: pa.Table) -> None:
        """`events` over the Parquet segments read by DuckDB plus the mapped hot ones."""
        con = self._connection()
        parquet = [f for f in files if not is_hot(f)]
        columns = ", ".join(EVENTS_SCHEMA.names)
        relation = con.from_arrow(hot).select(columns)
        if parquet:
            cold = con.read_parquet(parquet, hive_partitioning=False, union_by_name=True)
            relation = cold.select(columns).union(relation) if hot.num_rows else cold
        relation.create_view("events", replace=True)
        self._hot_table = hot  # the view scans it: it lives as long as the view

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
        return to_frame(self.arrow(sql, params))

    def arrow(
        self, sql: str, params: dict[str, Any] | None = None, events: bool = True
    ) -> pa.Table:
        """Run a query over the current snapshot of segments (`events=False`: a query of
        derived tables alone, which need not bind the `events` view)."""
        with self._lock:
            for attempt in range(2):
                self._refresh(events)
                try:
                    return self._connection().sql(sql, params=params or {}).to_arrow_table()
                except duckdb.IOException:
                    # A segment listed a moment ago was compacted away: list again, once.
                    self._viewed = None
                    if attempt:
                        raise
                except duckdb.Error as exc:
                    raise StoreError(f"query failed on {self.describe()}: {exc}") from exc
        raise AssertionError("unreachable")

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement on the reader's connection (what it creates is temporary: the
        folder is written by segments only)."""
        with self._lock:
            self._refresh()
            try:
                self._connection().execute(sql, params or {})
            except duckdb.Error as exc:
                raise StoreError(f"statement failed on {self.describe()}: {exc}") from exc

    def segmented(self) -> EmbeddedStore:
        return self

    def connection(self, events: bool = True) -> duckdb.DuckDBPyConnection:
        """The reader's DuckDB connection with `events` over the current segments
        (`events=False`: as it is, for derived tables alone)."""
        with self._lock:
            self._refresh(events)
            return self._connection()

    def pinned_connection(self, events: bool = True) -> tuple[duckdb.DuckDBPyConnection, str]:
        """The reader's connection and the snapshot id of exactly the segments it reads
        (`events=False`: the segments listed, the `events` view left as it was)."""
        with self._lock:
            self._refresh(events)
            return self._connection(), _digest(
                (Path(p) for p in self._snapshot or ()), self._log_sizes
            )

    def forget_snapshot(self) -> None:
        """Make the `events` view again before the next query that reads it (a segment
        it read was compacted away)."""
        with self._lock:
            self._viewed = None

    def key_rows(self, key: str) -> pa.Table:
        """A superset of the rows of `key`'s timeline (its rows and its jobs' rows).

        Reads the row groups the lookup index names plus the segments it does not cover
        yet, so the cost follows the key, not the size of the store.
        """
        with self._lock:
            if self._finder is None:
                self._finder = KeyFinder(self.events_dir, self.index_dir)
            return self._finder.rows(key)

    def rows_of(self, values: list[str]) -> pa.Table:
        """Every row whose idempotency_key or job_id is one of `values` (and maybe more),
        read through the lookup index like `key_rows`."""
        with self._lock:
            if self._finder is None:
                self._finder = KeyFinder(self.events_dir, self.index_dir)
            return self._finder.rows_of(values)

    def changes_since(self, read: dict[str, int]) -> Changes | None:
        """What the segments gained and lost since a reader read `read`
        (store/lineage.py); None if rows that retention dropped can no longer be read."""
        return since(self.trash_dir, self.segments(), read)

    def describe(self) -> str:
        return f"embedded store at {self.root}"

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
            self._viewed = None
        if self._finder is not None:
            self._finder.close()
            self._finder = None
        self._hot.clear()
        self._hot_table = None
        if self._logs is not None:
            self._logs.close()
            self._logs = None
        if self._spares is not None:
            self._spares.close()
            self._spares = None

    # ---- maintenance ---------------------------------------------------------------

    @contextmanager
    def _maintenance_lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".maintenance.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def compact(self, min_segments: int = 2, index_every: float = 0.0) -> int:
        """Merge each day's new segments into one, without repeats, sorted and indexed;
        then merge compacted segments of the same size tier (`MERGE_FANOUT` at a time).

        A day's new segments (hot ones, and Parquet ones its index does not cover yet) are
        merged when the day has `min_segments` segments or more, or nothing but new ones.
        The global lookup index is merged again from the day indexes once one changed, but
        no sooner than `index_every` seconds after its last merge: that merge reads every
        day kept (0.5 s at 4M events), and meanwhile readers consult the newer day indexes
        beside it (`lookup_index.current_indexes`). Returns how many segments were
        replaced. Safe while a writer adds segments (only the segments listed at the start
        are merged) and while readers query.
        """
        replaced = 0
        if self._logs is not None:
            self._logs.close()  # this store's own logs: the next commit starts new ones
        with self._maintenance_lock():
            # What a merge spilled and left when its process died: only merges, under this
            # lock, write there.
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            changed = False
            for folder in sorted(self.events_dir.glob("day=*")):
                day = folder.name.removeprefix("day=")
                compaction_journal.recover(folder, self._discard)
                merged, compacted = self._compact_day(
                    folder, self._day_covers(day), min_segments
                )
                if merged:
                    write_day_index(self.index_dir, day, sorted(compacted),
                                    self.compaction_memory, self._spill_dir)
                    replaced += merged
                    changed = True
            merged = (changed or self._global_is_stale()) and self._index_age() >= index_every
            if merged:
                self._merge_index()
            if changed or merged:
                remove_unnamed_filters(self.index_dir)
            self._empty_trash()
        return replaced

    def _compact_day(
        self, folder: Path, covered: set[str], min_segments: int
    ) -> tuple[int, list[Path]]:
        """How many of the day's segments were merged away (see `compact`), and its
        compacted segments now."""
        # A log a writer holds may grow still: it waits for a later round.
        segments = [p for p in sorted(_segments_in(folder.iterdir())) if not _is_open_log(p)]
        compacted = [p for p in segments if p.name in covered]
        new = [p for p in segments if p.name not in covered]
        replaced = 0
        commits = {p: frame_count(p) if is_log(p) else 1 for p in new}
        if empty := [p for p in new if commits[p] == 0]:  # a log closed before its first
            self._discard(empty)
            new = [p for p in new if commits[p]]
        if new and (len(compacted) + sum(commits.values()) >= min_segments or not compacted):
            for group, wide in _by_wide_bytes(new, self.wide_merge_bytes):
                compacted.append(self._merge(folder, group, wide))
            replaced += len(new)
        tiered = [
            p for p in compacted if _wide_bytes(p) <= self.wide_merge_bytes // MERGE_FANOUT
        ]
        while group := _tier_to_merge(tiered):
            self._stop_if_interrupted()
            merged_tier = self._merge(folder, group)
            compacted = [p for p in compacted if p not in group] + [merged_tier]
            tiered = [p for p in tiered if p not in group] + [merged_tier]
            replaced += len(group)
        return replaced, compacted

    def _day_covers(self, day: str) -> set[str]:
        path = self.index_dir / f"day={day}.parquet"
        if not path.exists():
            return set()
        return {name.partition("/")[2] for name in covered_by(path)}

    def _global_is_stale(self) -> bool:
        days = list(self.index_dir.glob("day=*.parquet")) if self.index_dir.exists() else []
        generations = global_indexes(self.index_dir)
        if not generations:
            return bool(days)
        newest = generations[-1].stat().st_mtime_ns
        return any(p.stat().st_mtime_ns > newest for p in days)

    def interrupt_compaction(self) -> None:
        """Stop a compaction under way, and any later one, at its next merge: a merge of
        millions of rows takes many seconds, and a collector shutting down should not
        wait for it. What was merged and placed stays; the rest is merged by the next
        compaction of another store object."""
        self._interrupted.set()
        merging = self._merging
        if merging is not None:
            with contextlib.suppress(duckdb.Error):  # closed as its merge ended
                merging.interrupt()

    def _stop_if_interrupted(self) -> None:
        if self._interrupted.is_set():
            raise CompactionInterrupted("compaction was interrupted")

    def _index_age(self) -> float:
        """Seconds since the newest global index was written (infinite without one)."""
        generations = global_indexes(self.index_dir)
        if not generations:
            return float("inf")
        return time.time() - generations[-1].stat().st_mtime

    def _merge_index(self) -> None:
        """A new global generation from the day indexes; older generations to `.trash/`."""
        older = global_indexes(self.index_dir)
        write_global_index(self.index_dir, f"{time.time_ns():020d}", self.compaction_memory,
                           self._spill_dir)
        self._discard(older)

    def _merge(self, folder: Path, inputs: list[Path], wide: bool = False) -> Path:
        """`inputs` merged into one compacted segment, sorted and without repeats; with
        `wide` rows (large values), on one DuckDB thread: each thread holds rows of its
        own while it sorts (30 MB less at peak for 60 MB of such rows). Rows beyond what
        the merge's memory holds are merged in sorted runs (`store/compaction_runs.py`)."""
        final = folder / _segment_name()
        temporary = temporary_for(final)
        target = str(temporary).replace("'", "''")  # COPY's target cannot be a parameter
        columns = ", ".join(EVENTS_SCHEMA.names)
        lineage = json.dumps(inputs_of(inputs)).replace("'", "''")
        options = (
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {COMPACTED_ROW_GROUP}, "
            f"ROW_GROUP_SIZE_BYTES '{COMPACTED_ROW_GROUP_BYTES}', "
            f"KV_METADATA {{'{LINEAGE}': '{lineage}'}})"
        )
        select = (
            f"SELECT {columns} FROM rows "
            f"QUALIFY row_number() OVER (PARTITION BY event_uid ORDER BY ts) = 1 "
            f"ORDER BY idempotency_key NULLS LAST, job_id, ts"
        )
        runs = compaction_runs.runs_needed(
            compaction_runs.uncompressed_bytes(inputs), self.compaction_memory
        )
        con = duckdb.connect(config={
            "memory_limit": self.compaction_memory, "temp_directory": str(self._spill_dir),
            **({"threads": 1} if wide else {}),
        })
        self._merging = con
        work = self._spill_dir / f"runs-{uuid.uuid4().hex[:12]}"
        try:
            self._stop_if_interrupted()
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET enable_progress_bar = false")  # a collector's stderr is its log
            if runs == 1:
                try:
                    self._merge_at_once(con, inputs, select, target, options)
                except duckdb.OutOfMemoryException:
                    runs = compaction_runs.FIRST_SPLIT
            if runs > 1:
                self._merge_in_runs(con, inputs, select, target, options, runs, work)
            self._stop_if_interrupted()  # asked before the COPY began, which clears it
        except BaseException as exc:
            temporary.unlink(missing_ok=True)
            if self._interrupted.is_set() and not isinstance(exc, CompactionInterrupted):
                raise CompactionInterrupted("compaction was interrupted") from exc
            raise
        finally:
            self._merging = None
            con.close()
            shutil.rmtree(work, ignore_errors=True)
        compaction_journal.begin(folder, final.name, inputs)
        place(temporary, final)
        self._discard(inputs)
        compaction_journal.end(folder, final.name)
        return final

    def _merge_at_once(
        self, con: duckdb.DuckDBPyConnection, inputs: list[Path], select: str, target: str,
        options: str,
    ) -> None:
        """The merge in one statement: sorted and deduplicated within the memory limit."""
        columns = ", ".join(EVENTS_SCHEMA.names)
        parquet = [str(p) for p in inputs if not is_hot(p)]
        hot = [p for p in inputs if is_hot(p)]
        sources = []
        if parquet:
            sources.append(
                f"SELECT {columns} FROM read_parquet($files, union_by_name = true, "
                f"hive_partitioning = false)"
            )
        if hot:  # streamed a segment at a time, not expanded all at once
            con.register("hot_segments", _hot_rows(hot))
            sources.append(f"SELECT {columns} FROM hot_segments")
        con.execute(
            f"COPY (WITH rows AS ({' UNION ALL '.join(sources)}) {select}) TO '{target}' "
            f"{options}",
            {"files": parquet} if parquet else {},
        )

    def _merge_in_runs(
        self, con: duckdb.DuckDBPyConnection, inputs: list[Path], select: str, target: str,
        options: str, runs: int, work: Path,
    ) -> None:
        """The merge as sorted runs by key range, then copied in order into `target`."""
        columns = ", ".join(EVENTS_SCHEMA.names)
        work.mkdir(parents=True, exist_ok=True)
        files = [str(p) for p in inputs if not is_hot(p)]
        if hot := [p for p in inputs if is_hot(p)]:  # read once per run: made Parquet once
            files.append(str(work / "hot.parquet"))
            with pq.ParquetWriter(files[-1], EVENTS_SCHEMA) as writer:
                for batch in _hot_rows(hot):
                    writer.write_batch(batch)
        source = (
            f"SELECT {columns} FROM read_parquet($files, union_by_name = true, "
            f"hive_partitioning = false)"
        )
        while True:
            ranges = compaction_runs.ranges(con, source, {"files": files}, runs)
            try:
                written = compaction_runs.write_runs(
                    con, source, {"files": files}, select, work, ranges, files,
                    between=self._stop_if_interrupted,
                )
                break
            except duckdb.OutOfMemoryException:
                if runs >= compaction_runs.MAX_RUNS:
                    raise
                runs = min(runs * 4, compaction_runs.MAX_RUNS)
        log.info("merged %d segment(s) in %d sorted runs", len(inputs), len(written))
        compaction_runs.concatenate(
            written, Path(target.replace("''", "'")), {LINEAGE: json.dumps(inputs_of(inputs))},
            COMPACTED_ROW_GROUP, compaction_runs.duckdb_bytes(COMPACTED_ROW_GROUP_BYTES),
        )

    def _discard(self, paths: list[Path]) -> None:
        self.trash_dir.mkdir(parents=True, exist_ok=True)
        for path in paths:
            target = self.trash_dir / f"{path.parent.name}-{path.name}-{uuid.uuid4().hex[:8]}"
            os.rename(path, target)
            os.utime(target)  # the grace period runs from now, not from the write
        fsync_dir(self.trash_dir)
        if self.events_dir.exists():
            note_change(self.events_dir)

    def _empty_trash(self, grace_seconds: float = TRASH_GRACE_SECONDS) -> None:
        if not self.trash_dir.exists():
            return
        cutoff = time.time() - grace_seconds
        for entry in self.trash_dir.iterdir():
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    def drop_days_before(self, keep_from: date) -> list[str]:
        """Retention: whole day folders older than `keep_from` go; returns the days dropped."""
        dropped = []
        with self._maintenance_lock():
            for day in self.days():
                if date.fromisoformat(day) < keep_from:
                    folder = self.events_dir / f"day={day}"
                    self.trash_dir.mkdir(parents=True, exist_ok=True)
                    target = self.trash_dir / f"day={day}-{uuid.uuid4().hex[:8]}"
                    os.rename(folder, target)
                    os.utime(target)
                    note_change(self.events_dir)
                    day_index = self.index_dir / f"day={day}.parquet"
                    if day_index.exists():
                        self._discard([day_index])
                    dropped.append(day)
            if dropped and global_indexes(self.index_dir):
                self._merge_index()
            if dropped:
                remove_unnamed_filters(self.index_dir)
        return dropped


class CompactionInterrupted(StoreError):
    """A compaction stopped by `interrupt_compaction`."""


def _hot_rows(paths: list[Path]) -> pa.RecordBatchReader:
    """The rows of hot segments in EVENTS_SCHEMA, read one segment at a time."""
    return pa.RecordBatchReader.from_batches(
        EVENTS_SCHEMA, (batch for path in paths for batch in read_hot(path).to_batches())
    )


def _wide_bytes(path: Path) -> int:
    """The bytes of a segment's rows (uncompressed) if they average over WIDE_ROW_BYTES
    a row, else 0."""
    if is_hot(path):
        table = read_hot(path)
        rows, nbytes = table.num_rows, table.nbytes
    else:
        metadata = pq.read_metadata(path)
        rows = metadata.num_rows
        nbytes = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    return nbytes if nbytes > WIDE_ROW_BYTES * max(rows, 1) else 0


def _by_wide_bytes(paths: list[Path], limit: int) -> Iterator[tuple[list[Path], bool]]:
    """`paths` in order, in groups holding at most `limit` bytes of wide rows (a segment
    larger than that alone), each with whether it holds any."""
    group: list[Path] = []
    held = 0
    for path in paths:
        wide = _wide_bytes(path)
        if group and held + wide > limit:
            yield group, held > 0
            group, held = [], 0
        group.append(path)
        held += wide
    if group:
        yield group, held > 0


def _is_open_log(path: Path) -> bool:
    try:
        return is_log(path) and is_open(path)
    except FileNotFoundError:  # moved away meanwhile
        return True


def _tier(rows: int) -> int:
    """0 under TIER_BASE_ROWS rows, n under TIER_BASE_ROWS * MERGE_FANOUT ** n."""
    tier, bound = 0, TIER_BASE_ROWS
    while rows >= bound:
        tier, bound = tier + 1, bound * MERGE_FANOUT
    return tier


def _tier_to_merge(compacted: list[Path]) -> list[Path]:
    """The MERGE_FANOUT smallest compacted segments of the lowest tier that has that many
    (settled ones aside); none when no tier has."""
    tiers: dict[int, list[tuple[int, Path]]] = {}
    for path in compacted:
        rows = pq.read_metadata(path).num_rows
        if rows < SETTLED_ROWS:
            tiers.setdefault(_tier(rows), []).append((rows, path))
    for tier in sorted(tiers):
        if len(tiers[tier]) >= MERGE_FANOUT:
            return [path for _, path in sorted(tiers[tier])[:MERGE_FANOUT]]
    return []
