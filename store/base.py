"""What every store does: take Arrow batches durably and answer SQL with bound parameters.

The query library (`queries/`) holds the SQL; a store only knows its dialect, how to bind
parameters and where the `events` relation lives.
"""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd
import pyarrow as pa


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
