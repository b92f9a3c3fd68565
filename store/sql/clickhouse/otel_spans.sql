-- The OpenTelemetry Collector's otel_traces (Map layout: attributes as
-- Map(LowCardinality(String), String)), one row per span, attributes as plain
-- Map(String, String) so that the JSON layout (otel_spans_json.sql) can give the same.
-- Reads otel_traces_source, a view of the user's table: dupescope never writes to it.
SELECT
    Timestamp AS start_ts,
    TraceId AS trace_id,
    SpanId AS span_id,
    ParentSpanId AS parent_span_id,
    toString(SpanName) AS span_name,
    toString(SpanKind) AS span_kind,
    Duration AS duration_ns,
    StatusMessage AS status_message,
    CAST(ResourceAttributes, 'Map(String, String)') AS resource_attrs,
    CAST(SpanAttributes, 'Map(String, String)') AS own_attrs,
    `Events.Timestamp` AS step_ts,
    CAST(`Events.Name`, 'Array(String)') AS step_names,
    CAST(`Events.Attributes`, 'Array(Map(String, String))') AS step_attrs
FROM otel_traces_source
