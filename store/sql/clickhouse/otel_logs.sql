-- The OpenTelemetry Collector's otel_logs (Map layout), one row per log record, attributes
-- as plain Map(String, String). Both layouts in use read alike here: before v0.151 with a
-- TimestampTime column and ORDER BY (ServiceName, TimestampTime, Timestamp), since with
-- ORDER BY (toStartOfFiveMinutes(Timestamp), ServiceName, Timestamp).
-- Reads otel_logs_source, a view of the user's table: dupescope never writes to it.
SELECT
    Timestamp AS record_time,
    TraceId AS trace_id,
    SpanId AS span_id,
    Body AS body,
    CAST(ResourceAttributes, 'Map(String, String)') AS resource_attrs,
    CAST(LogAttributes, 'Map(String, String)') AS own_attrs
FROM otel_logs_source
