"""Millions of `otel_traces` rows as the Collector's ClickHouse exporter writes them, fast.

The SDK path (sample_data.otlp, then sample_data.clickhouse_exporter.span_rows) runs the
workload model through real OpenTelemetry spans: right for tests, about 2,500 spans a
second. This builds the same shape column-wise from the vectorised model
(sample_data.fast), for the 10M-span benchmark:

- each execution (a `deliver` and the worker steps of the same job_id, attempt and
  worker) is one CONSUMER span starting at its deliver, its steps as span events (`Events`
  nested columns) whose attributes carry the step's lock fields;
- every other event is a span of its own naming its event kind (`event` attribute), an
  `enqueue` a PRODUCER span;
- one trace per job; every attribute value is text, as the exporter writes Map columns.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pyarrow as pa

from sample_data import fast

WORKER_STEPS = ["lock_acquire", "lock_contended", "lock_renew", "lock_release",
                "lock_expired", "idempotency_hit", "side_effect", "occ_conflict", "commit",
                "ack", "nack", "fail"]
#: Span attributes: the job's own fields (an execution's and a standalone event's).
SPAN_FIELDS = ["job_id", "job_type", "idempotency_key", "resource_key", "queue",
               "delivery_attempt", "worker_id", "visibility_timeout_ms", "service_version"]
#: A step's own attributes.
STEP_FIELDS = ["lock_key", "lock_owner", "lock_ttl_ms"]
#: The resource of every span unless told otherwise: the service's name alone.
SERVICE_RESOURCE = {"service.name": "worker"}
#: The resource an OpenTelemetry Python SDK with its process and OS detectors gives a
#: worker (15 keys, every value as text, as the exporter writes them): what a real
#: exporter's table holds on every span, and what its first read maps into every event's
#: attrs. `service.instance.id` is a worker_id spelling, taken where a span names none.
SDK_RESOURCE = {
    "telemetry.sdk.language": "python", "telemetry.sdk.name": "opentelemetry",
    "telemetry.sdk.version": "1.45.2", "service.name": "worker",
    "service.instance.id": "796c027d-c498-4f9e-8798-dc17cfe2a15d",
    "process.runtime.description": "3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0]",
    "process.runtime.name": "cpython", "process.runtime.version": "3.11.7",
    "process.pid": "4168", "process.executable.name": "python",
    "process.executable.path": "/srv/worker/.venv/bin/python",
    "process.command": "/srv/worker/.venv/bin/celery", "process.parent_pid": "4164",
    "os.type": "linux", "os.version": "6.18.44",
}
_MAP = pa.map_(pa.string(), pa.string())


def _text(frame: pl.DataFrame, fields: list[str]) -> pl.DataFrame:
    return frame.with_columns([pl.col(f).cast(pl.String) for f in fields])


def _maps(frame: pl.DataFrame, fields: list[str],
          extra: dict[str, pl.Expr] | None = None) -> pa.Array:
    """One Map(String, String) a row: the non-null `fields` (and `extra`), as text."""
    extra = extra or {}
    columns = _text(frame.with_columns(**extra).select(fields + list(extra)),
                    fields + list(extra))
    names = columns.columns
    long = (columns.with_row_index("row")
            .unpivot(index="row", on=names, variable_name="key", value_name="value")
            .drop_nulls("value").sort("row", maintain_order=True))
    counts = np.bincount(long["row"].to_numpy(), minlength=frame.height)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.MapArray.from_arrays(pa.array(offsets), long["key"].to_arrow(),
                                   long["value"].to_arrow())


def _lists(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


def _ids(column: pl.Expr, length: int) -> pl.Expr:
    """A digit string of `length` from two hashes of `column` (ids need only be distinct)."""
    text = column.cast(pl.String)
    first = text.hash(seed=7).cast(pl.String).str.pad_start(20, "0")
    second = text.hash(seed=11).cast(pl.String).str.pad_start(20, "0")
    return (first + second).str.slice(0, length)


def exporter_rows(events: pl.DataFrame, resource: dict[str, str] | None = None) -> pa.Table:
    """`otel_traces` rows (Map layout) for contract `events` of the workload model, each
    span's resource `resource` (SERVICE_RESOURCE by default)."""
    resource_columns = {k: pl.lit(v) for k, v in (resource or SERVICE_RESOURCE).items()}
    events = events.with_row_index("i").with_columns(
        pl.concat_str([pl.col("job_id"), pl.col("delivery_attempt").cast(pl.String),
                       pl.col("worker_id")], separator="|").alias("execution"))
    delivers = events.filter(pl.col("event") == "deliver")
    steps = (events.filter(pl.col("event").is_in(WORKER_STEPS))
             .join(delivers.select("execution"), on="execution", how="semi"))
    alone = events.join(steps.select("i"), on="i", how="anti").filter(
        pl.col("event") != "deliver")
    executions = delivers.sort("execution")
    steps = steps.sort("execution", "ts")
    counts = (executions.select("execution")
              .join(steps.group_by("execution").agg(pl.len().alias("n"),
                                                     pl.col("ts").max().alias("end")),
                    on="execution", how="left", maintain_order="left"))
    step_offsets = np.concatenate([[0], np.cumsum(counts["n"].fill_null(0).to_numpy())])
    end = counts["end"].fill_null(executions["ts"])
    durations = ((end - executions["ts"]).dt.total_microseconds() * 1000).cast(pl.UInt64)
    ns = pa.timestamp("ns")
    spans = {
        "Timestamp": pa.concat_arrays([executions["ts"].to_arrow().cast(ns),
                                       alone["ts"].to_arrow().cast(ns)]),
        "TraceId": pl.concat([executions.select(_ids(pl.col("job_id"), 32).alias("t")),
                              alone.select(_ids(pl.col("job_id").fill_null(
                                  pl.col("worker_id")), 32).alias("t"))])["t"].to_arrow(),
        "SpanId": pl.concat([executions.select(_ids(pl.col("execution"), 16).alias("s")),
                             alone.select(_ids(pl.col("i").cast(pl.String), 16).alias("s"))
                             ])["s"].to_arrow(),
        "ParentSpanId": pa.array([""] * (executions.height + alone.height)),
        "TraceState": pa.array([""] * (executions.height + alone.height)),
        "SpanName": pl.concat([executions.select((pl.col("job_type") + " process").alias("n")),
                               alone.select(pl.col("event").alias("n"))])["n"].to_arrow(),
        "SpanKind": pl.concat([
            executions.with_columns(k=pl.lit("Consumer")).select("k"),
            alone.select(pl.when(pl.col("event") == "enqueue").then(pl.lit("Producer"))
                         .otherwise(pl.lit("Internal")).alias("k"))])["k"].to_arrow(),
        "ServiceName": pa.array(["worker"] * (executions.height + alone.height)),
        "ResourceAttributes": pa.concat_arrays([
            _maps(executions, [], resource_columns),
            _maps(alone, [], resource_columns)]),
        "ScopeName": pa.array(["dupescope.bench"] * (executions.height + alone.height)),
        "ScopeVersion": pa.array([""] * (executions.height + alone.height)),
        "SpanAttributes": pa.concat_arrays([
            _maps(executions, SPAN_FIELDS),
            _maps(alone, SPAN_FIELDS + STEP_FIELDS, {"event": pl.col("event")})]),
        "Duration": pa.concat_arrays([durations.to_arrow(),
                                      pa.array([0] * alone.height, pa.uint64())]),
        "StatusCode": pa.array(["Unset"] * (executions.height + alone.height)),
        "StatusMessage": pa.array([""] * (executions.height + alone.height)),
    }
    empty_offsets = np.zeros(alone.height, dtype=np.int64)
    all_offsets = np.concatenate([step_offsets, step_offsets[-1] + empty_offsets])
    spans["Events.Timestamp"] = _lists(all_offsets, steps["ts"].to_arrow().cast(ns))
    spans["Events.Name"] = _lists(all_offsets, steps["event"].to_arrow())
    spans["Events.Attributes"] = _lists(all_offsets, _maps(steps, STEP_FIELDS))
    return pa.table(spans)


def batches(spans: int, *, chunk_events: int = 3_000_000, seed: int = 5,
            resource: dict[str, str] | None = None) -> Iterator[tuple[pa.Table, pa.Table]]:
    """(`otel_traces` rows, the contract events they carry), chunk after chunk of the
    model's events, until at least `spans` spans (whole chunks: a chunk's jobs are whole)."""
    made = 0
    for events in fast.arrow_batches(10**12, seed=seed, batch_rows=chunk_events):
        rows = exporter_rows(pl.from_arrow(events), resource)
        made += rows.num_rows
        yield rows, events
        if made >= spans:
            return


def insert(session: object, table: str, rows: pa.Table) -> None:
    """`rows` into an `otel_traces` table of a chDB session, as one insert (one part)."""
    columns = ", ".join(f"`{name}`" for name in rows.column_names)
    data = rows  # noqa: F841 - read by chDB's Python() by name
    session.query(f"INSERT INTO {table} ({columns}) SELECT * FROM Python(data)")  # type: ignore[attr-defined]
