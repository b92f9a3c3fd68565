-- The spans of a refresh's read that have a step child span, in this read or an earlier
-- one (otel_span_kinds.sql makes them executions). Refilled by every refresh.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_step_parents (parent_span_id String)
ENGINE = MergeTree ORDER BY tuple()
