-- Every step child span read so far, by its parent: a parent span the exporter writes
-- after its children is an execution by them, without reading them again. By day, as the
-- exporter's tables, so that retention drops them with their spans.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_step_children (
    parent_span_id String,
    trace_id String,
    day Date
) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (parent_span_id, trace_id)
