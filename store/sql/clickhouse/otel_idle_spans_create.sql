-- Spans read so far that name a job but record no event: a step child span read later
-- makes one an execution, and then it is read again (by its trace). Other spans can never
-- become an event that names a job, so no other span read is ever read again.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_idle_spans (
    span_id String,
    trace_id String,
    day Date
) ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY span_id
