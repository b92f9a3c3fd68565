"""The canonical event row as Arrow: one schema for Parquet segments, DuckDB and ClickHouse.

Every source is normalised into these columns, derived from the contract's columns
(store/contract.py). `attrs` holds the rest of a record as a JSON object string, which both
engines can query and neither has to agree with the other on a map type for.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from store import contract
from store.contract import (
    EVENT_KINDS,
    EXECUTION_STEPS,
    INT_FIELDS,
    STRING_FIELDS,
    TS_UNIT,
    Column,
    ColumnType,
)

#: The contract's names, for the many readers that import them from here.
__all__ = [
    "EVENT_KINDS", "EXECUTION_STEPS", "INT_FIELDS", "STRING_FIELDS", "EVENTS_SCHEMA",
    "COLUMNS", "VIEW_SCHEMA", "RUNS_SCHEMA", "ROW_OWN_COLUMNS", "RUN_COLUMNS",
    "arrow_type", "as_events", "as_runs", "concat", "empty_table", "is_runs",
]

_ARROW_TYPES: dict[ColumnType, pa.DataType] = {
    "string": pa.string(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "timestamp": pa.timestamp(TS_UNIT, tz="UTC"),
}


def arrow_type(column: Column) -> pa.DataType:
    return _ARROW_TYPES[column.type]


EVENTS_SCHEMA = pa.schema(
    [pa.field(c.name, arrow_type(c), nullable=c.nullable) for c in contract.COLUMNS]
)

COLUMNS: tuple[str, ...] = tuple(EVENTS_SCHEMA.names)

#: EVENTS_SCHEMA with its text as string views: polars' own layout, which the column-wise
#: ingest hands to the segment writer as is (a cast to `string` would copy every value).
#: Parquet stores both alike, and reads back as EVENTS_SCHEMA.
VIEW_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.string_view() if f.type == pa.string() else f.type, f.nullable)
        for f in EVENTS_SCHEMA
    ]
)


def empty_table() -> pa.Table:
    """No rows, in EVENTS_SCHEMA. Unlike `Schema.empty_table`, which imports pandas on its
    first call (a third of a second), it keeps ingest's workers free of pandas."""
    return pa.Table.from_batches([], schema=EVENTS_SCHEMA)


#: The columns a span's rows share: an execution span with lifecycle steps as span events
#: gives one row per step, alike but for these three. Every other column may be run-end
#: encoded (RUNS_SCHEMA), which stores a span's value once instead of once a row.
ROW_OWN_COLUMNS = ("event_uid", "ts", "event")
RUN_COLUMNS: tuple[str, ...] = tuple(n for n in COLUMNS if n not in ROW_OWN_COLUMNS)

#: EVENTS_SCHEMA with RUN_COLUMNS run-end encoded: what the native OTLP decoder hands over
#: for spans with steps, and how a collector's hot segments keep them (less than half the
#: bytes to write and fsync). Every other consumer reads it through `as_events`.
RUNS_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.run_end_encoded(pa.int32(), f.type))
        if f.name in RUN_COLUMNS else f
        for f in EVENTS_SCHEMA
    ]
)


def is_runs(table: pa.Table) -> bool:
    return bool(table.schema.equals(RUNS_SCHEMA))


def as_events(table: pa.Table) -> pa.Table:
    """`table` in EVENTS_SCHEMA; one already in it is returned as it is (a cast of every
    column costs a collector's batch about as much as its claim of uids). Run-end encoded
    columns are expanded, which Arrow's cast does not do."""
    if table.schema.equals(EVENTS_SCHEMA):
        return table
    if any(pa.types.is_run_end_encoded(f.type) for f in table.schema):
        table = pa.table(
            [
                pc.run_end_decode(column) if pa.types.is_run_end_encoded(column.type)
                else column
                for column in table.columns
            ],
            names=table.column_names,
        )
    return table.cast(EVENTS_SCHEMA)


def concat(tables: list[pa.Table]) -> pa.Table:
    """Batches as one table: in RUNS_SCHEMA when every one is, else in EVENTS_SCHEMA."""
    if all(is_runs(t) for t in tables):
        return pa.concat_tables(tables)
    return pa.concat_tables([as_events(t) for t in tables])


def as_runs(table: pa.Table) -> pa.Table:
    """`table` in RUNS_SCHEMA: each of RUN_COLUMNS as runs of equal adjacent values."""
    if is_runs(table):
        return table
    table = as_events(table)
    return pa.table(
        [
            pc.run_end_encode(table[name], run_end_type=pa.int32())
            if name in RUN_COLUMNS else table[name]
            for name in COLUMNS
        ],
        schema=RUNS_SCHEMA,
    )
