"""What every store does: take Arrow batches durably and answer SQL with bound parameters.

The query library (`queries/`) holds the SQL; a store only knows its dialect, how to bind
parameters and where the `events` relation lives.
"""

from __future__ import annotations

import functools
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from store.lineage import Changes

from store.segments import SegmentWriter

# Below this many rows, starting conversion threads costs more than it saves (a quarter of
# a key timeline's conversion).
THREADED_ROWS = 10_000


@functools.cache
def _nullable_ints() -> dict[pa.DataType, Any]:
    """pandas is imported here, not with the module: ingest's worker processes import the
    store's schema and write path, never make a frame, and pandas cost them 0.2 s to start."""
    import pandas as pd

    return {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
    }


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow -> pandas with nullable integers, so a missing attempt stays 1, 2 or <NA>."""
    threads = table.num_rows >= THREADED_ROWS
    frame: pd.DataFrame = table.to_pandas(
        types_mapper=_nullable_ints().get, use_threads=threads
    )
    return frame


class StoreError(RuntimeError):
    """A store that cannot be opened, written or queried; the message says which and why."""


@runtime_checkable
class Store(Protocol):
    """What every store offers: the embedded folder, a ClickHouse server, chDB, and the
    OpenTelemetry Collector's tables read in place.

    Where a store has no cheaper way to answer than the SQL every store runs (a snapshot
    id, a key's rows), the method says so by returning None, and the caller asks `events`.
    What only a folder of segments offers (compaction, a DuckDB reader, files beside the
    events) is a separate interface, `SegmentedStore`, reached through `segmented()`.
    """

    #: "duckdb" or "clickhouse": which variant of a query file to run.
    dialect: str

    def write(self, table: pa.Table) -> int:
        """Persist a batch of canonical rows; returns only once the batch is durable."""
        ...

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """Run SQL in this store's dialect with named, bound parameters."""
        ...

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """`execute`, answered as Arrow (list columns stay cheap to turn into lists)."""
        ...

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement that returns no rows (derived tables, alert state)."""
        ...

    def snapshot_id(self) -> str | None:
        """A cheap id that changes whenever the events change (a cache key for derived
        data), or None where only a query over `events` can tell."""
        ...

    def key_rows(self, key: str) -> pa.Table | None:
        """A superset of the rows of `key`'s timeline, read through an index the store
        keeps; None where it keeps none, and timeline.sql answers over `events`."""
        ...

    def segmented(self) -> SegmentedStore | None:
        """This store as a folder of segments (the embedded store), or None for a database
        that keeps its own storage and merges by itself (ClickHouse, chDB)."""
        ...

    def describe(self) -> str:
        """A short human description (for logs and the dashboard's footer)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SegmentedStore(Store, Protocol):
    """A store kept as a folder of immutable segments, read through an in-process DuckDB.

    Its writer can run in other processes (ingest's workers), a collector's small commits
    go to hot logs that compaction rewrites, and the folder holds what lives beside the
    events: derived tables, alert state, tail offsets.
    """

    #: The store's folder.
    root: Path

    def snapshot_id(self) -> str: ...

    def key_rows(self, key: str) -> pa.Table: ...

    def rows_of(self, values: list[str]) -> pa.Table:
        """Every row whose idempotency_key or job_id is one of `values` (and maybe more),
        found through the lookup index: the cost follows the values, not the store."""
        ...

    def changes_since(self, read: dict[str, int]) -> Changes | None:
        """What the segments gained and lost since a reader read `read` (None: cannot
        tell, build from nothing)."""
        ...

    def write_hot(self, table: pa.Table) -> int:
        """`write` for a small batch that compaction will soon rewrite (a collector's
        group commit); durable on return."""
        ...

    def segment_writer(self) -> SegmentWriter:
        """What `write` does, as a small value another process can run."""
        ...

    def segments(self) -> list[Path]:
        """Every segment, Parquet and hot, in order of arrival within each day."""
        ...

    def arrow(
        self, sql: str, params: dict[str, Any] | None = None, events: bool = True
    ) -> pa.Table:
        """`Store.arrow`; `events=False` for a query of derived tables alone, which then
        need not bind the `events` view over every segment."""
        ...

    def connection(self, events: bool = True) -> duckdb.DuckDBPyConnection:
        """The reader's DuckDB connection with `events` over the current segments
        (`events=False`: as it is, for derived tables alone)."""
        ...

    def pinned_connection(self, events: bool = True) -> tuple[duckdb.DuckDBPyConnection, str]:
        """The reader's connection and the snapshot id of exactly the segments it reads
        (`events=False`: the segments listed, the `events` view left as it was)."""
        ...

    def forget_snapshot(self) -> None:
        """List the segments again before the next query (one was compacted away)."""
        ...

    def compact(self, min_segments: int = 2, index_every: float = 0.0) -> int:
        """Merge small segments into sorted, indexed ones; returns how many were replaced."""
        ...

    def interrupt_compaction(self) -> None:
        """Stop a compaction under way, and any later one, at its next merge."""
        ...

    def drop_days_before(self, keep_from: date) -> list[str]:
        """Retention: whole days older than `keep_from` go; returns the days dropped."""
        ...
