"""The workload as the OpenTelemetry Collector's ClickHouse exporter writes it.

Its tables, written from the exporter's DDL templates (traces with Map or JSON attributes;
logs before v0.151 with TimestampTime, since ordered by five-minute buckets, and JSON), and
OTLP protobuf spans and log records turned into rows the way the exporter writes them:
ids as hex, SpanKind as pdata names it ("Producer"), every Map value a string (pdata's
AsString: 2 -> '2', true -> 'true'), the JSON layout keeping JSON values.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as the Python value pdata holds (bytes as hex, as dupescope reads)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)

_MAP = "Map(LowCardinality(String), String)"


def _indexes(*, json: bool, attrs: tuple[str, ...], duration: bool) -> str:
    """The exporter's skip indexes: a bloom filter on TraceId, on the Map attributes' keys
    and values (the JSON layout has none), and a minmax on Duration."""
    lines = ["    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,"]
    if not json:
        for column, short in (("ResourceAttributes", "res_attr"),) + tuple(
                (a, a.removesuffix("Attributes").lower() + "_attr") for a in attrs):
            lines += [f"    INDEX idx_{short}_key mapKeys({column}) TYPE bloom_filter(0.01) "
                      "GRANULARITY 1,",
                      f"    INDEX idx_{short}_value mapValues({column}) TYPE bloom_filter(0.01) "
                      "GRANULARITY 1,"]
    if duration:
        lines.append("    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,")
    return "\n".join(lines).rstrip(",")


def traces_ddl(database: str, *, json: bool = False, table: str = "otel_traces") -> str:
    attrs = "JSON" if json else _MAP
    indexes = _indexes(json=json, attrs=("SpanAttributes",), duration=True)
    return f"""CREATE TABLE IF NOT EXISTS {database}.{table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes {attrs} CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes {attrs} CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes {attrs}
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes {attrs}
    ) CODEC(ZSTD(1)),
{indexes}
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""


def logs_ddl(database: str, *, layout: str = "current", table: str = "otel_logs") -> str:
    """`layout`: "timestamp_time" (before v0.151), "current" (since) or "json"."""
    attrs = "JSON" if layout == "json" else _MAP
    indexes = _indexes(json=layout == "json", attrs=("ScopeAttributes", "LogAttributes"),
                       duration=False)
    timestamp_time = (
        "    TimestampTime DateTime DEFAULT toDateTime(Timestamp),\n"
        if layout == "timestamp_time" else ""
    )
    order = (
        "PARTITION BY toDate(TimestampTime)\nPRIMARY KEY (ServiceName, TimestampTime)\n"
        "ORDER BY (ServiceName, TimestampTime, Timestamp)"
        if layout == "timestamp_time"
        else "PARTITION BY toDate(Timestamp)\n"
        "ORDER BY (toStartOfFiveMinutes(Timestamp), ServiceName, Timestamp)"
    )
    return f"""CREATE TABLE IF NOT EXISTS {database}.{table} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
{timestamp_time}    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes {attrs} CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes {attrs} CODEC(ZSTD(1)),
    LogAttributes {attrs} CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
{indexes}
) ENGINE = MergeTree
{order}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""


class CollectingExporter(SpanExporter):
    """Keeps each export call as the OTLP request an SDK would send."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.requests.append(encode_spans(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


_KINDS = {0: "Unspecified", 1: "Internal", 2: "Server", 3: "Client", 4: "Producer",
          5: "Consumer"}
_STATUS = {0: "Unset", 1: "Ok", 2: "Error"}


def as_string(value: Any) -> str:
    """pdata's Value.AsString: what the Map layout stores for an attribute value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return str(value)


def _attrs(pairs: Any, *, json: bool) -> Any:
    values = {kv.key: any_value(kv.value) for kv in pairs}
    return values if json else {k: as_string(v) for k, v in values.items()}


def _time(ns: int) -> str:
    stamp = datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp}.{ns % 1_000_000_000:09d}"


def span_rows(requests: Iterable[ExportTraceServiceRequest], *, json: bool = False
              ) -> list[dict[str, Any]]:
    """One otel_traces row per span, as the exporter writes it."""
    rows = []
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = _attrs(resource_spans.resource.attributes, json=json)
            service = str(resource.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    rows.append({
                        "Timestamp": _time(span.start_time_unix_nano),
                        "TraceId": span.trace_id.hex(),
                        "SpanId": span.span_id.hex(),
                        "ParentSpanId": span.parent_span_id.hex(),
                        "TraceState": span.trace_state,
                        "SpanName": span.name,
                        "SpanKind": _KINDS[span.kind],
                        "ServiceName": service,
                        "ResourceAttributes": resource,
                        "ScopeName": scope_spans.scope.name,
                        "ScopeVersion": scope_spans.scope.version,
                        "SpanAttributes": _attrs(span.attributes, json=json),
                        "Duration": span.end_time_unix_nano - span.start_time_unix_nano,
                        "StatusCode": _STATUS[span.status.code],
                        "StatusMessage": span.status.message,
                        "Events.Timestamp": [_time(e.time_unix_nano) for e in span.events],
                        "Events.Name": [e.name for e in span.events],
                        "Events.Attributes": [_attrs(e.attributes, json=json)
                                              for e in span.events],
                        "Links.TraceId": [], "Links.SpanId": [], "Links.TraceState": [],
                        "Links.Attributes": [],
                    })
    return rows


def log_rows(requests: Iterable[ExportLogsServiceRequest], *, json: bool = False
             ) -> list[dict[str, Any]]:
    """One otel_logs row per log record, as the exporter writes it (a structured body as
    JSON text)."""
    rows = []
    for request in requests:
        for resource_logs in request.resource_logs:
            resource = _attrs(resource_logs.resource.attributes, json=json)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    body = any_value(record.body)
                    rows.append({
                        "Timestamp": _time(record.time_unix_nano
                                           or record.observed_time_unix_nano),
                        "TraceId": record.trace_id.hex(),
                        "SpanId": record.span_id.hex(),
                        "TraceFlags": record.flags & 0xFF,
                        "SeverityText": record.severity_text,
                        "SeverityNumber": int(record.severity_number),
                        "ServiceName": str(resource.get("service.name", "")),
                        "Body": "" if body is None else as_string(body),
                        "ResourceAttributes": resource,
                        "ScopeName": scope_logs.scope.name,
                        "ScopeAttributes": _attrs(scope_logs.scope.attributes, json=json),
                        "LogAttributes": _attrs(record.attributes, json=json),
                        "EventName": getattr(record, "event_name", ""),
                    })
    return rows


def insert(session: Any, table: str, rows: list[dict[str, Any]], chunk: int = 20_000) -> None:
    """Rows into a chDB table through JSONEachRow, in batches as the exporter sends them."""
    for start in range(0, len(rows), chunk):
        _insert(session, table, rows[start:start + chunk])


def _insert(session: Any, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    buf = io.BytesIO()
    for row in rows:
        buf.write(orjson.dumps(row) + b"\n")
    session.query(f"INSERT INTO {table} FORMAT JSONEachRow\n{buf.getvalue().decode()}")
