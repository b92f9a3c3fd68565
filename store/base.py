"""What every store does: take Arrow batches durably and answer SQL with bound parameters.

The query library (`queries/`) holds the SQL; a store only knows its dialect, how to bind
parameters and where the `events` relation lives.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd


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
    return table.to_pandas(types_mapper=_nullable_ints().get, use_threads=threads)


class StoreError(RuntimeError):
    """A store that cannot be opened, written or queried; the message says which and why."""


class Store(Protocol):
    #: "duckdb" or "clickhouse": which variant of a query file to run.
    dialect: str

    def write(self, table: pa.Table) -> int:
        """Persist a batch of canonical rows; returns only once the batch is durable."""
        ...

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """Run SQL in this store's dialect with named, bound parameters."""
        ...

    def describe(self) -> str:
        """A short human description (for logs and the dashboard's footer)."""
        ...

    def close(self) -> None: ...
