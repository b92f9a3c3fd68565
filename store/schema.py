"""The canonical event row: one schema for Parquet segments, DuckDB and ClickHouse.

Every source is normalised into these columns (see the event contract). `attrs` holds the
rest of a record as a JSON object string, which both engines can query and neither has to
agree with the other on a map type for.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

EVENT_KINDS: tuple[str, ...] = (
    "outbox_write",
    "enqueue",
    "enqueue_deduped",
    "deliver",
    "lock_acquire",
    "lock_contended",
    "lock_renew",
    "lock_release",
    "lock_expired",
    "idempotency_hit",
    "side_effect",
    "occ_conflict",
    "commit",
    "ack",
    "nack",
    "fail",
    "worker_start",
    "worker_stop",
)

#: The steps of an execution between its `deliver` and its end, in contract order.
EXECUTION_STEPS: tuple[str, ...] = EVENT_KINDS[
    EVENT_KINDS.index("lock_acquire") : EVENT_KINDS.index("fail") + 1
]

STRING_FIELDS: tuple[str, ...] = (
    "job_id",
    "job_type",
    "idempotency_key",
    "resource_key",
    "queue",
    "worker_id",
    "lock_key",
    "lock_owner",
    "service_version",
    "trace_id",
    "span_id",
)
INT_FIELDS: tuple[str, ...] = ("delivery_attempt", "lock_ttl_ms", "visibility_timeout_ms")

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("event_uid", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("job_type", pa.string()),
        pa.field("idempotency_key", pa.string()),
        pa.field("resource_key", pa.string()),
        pa.field("queue", pa.string()),
        pa.field("delivery_attempt", pa.int32()),
        pa.field("worker_id", pa.string()),
        pa.field("lock_key", pa.string()),
        pa.field("lock_owner", pa.string()),
        pa.field("lock_ttl_ms", pa.int64()),
        pa.field("visibility_timeout_ms", pa.int64()),
        pa.field("service_version", pa.string()),
        pa.field("trace_id", pa.string()),
        pa.field("span_id", pa.string()),
        # The execution span a row came from, where the source says so (OTLP): one
        # execution span is one execution. Null for logs, where executions are derived.
        pa.field("execution_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("attrs", pa.string()),
    ]
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
    return EVENTS_SCHEMA.empty_table()


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
