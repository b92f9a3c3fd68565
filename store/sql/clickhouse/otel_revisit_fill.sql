-- The traces to read again: those of spans read earlier that name a job and record no
-- event, now that a step child span of theirs is read (they become executions).
INSERT INTO {own:Identifier}.{traces:Identifier} (trace_id)
SELECT DISTINCT trace_id
FROM {own:Identifier}.otel_idle_spans
WHERE span_id IN (SELECT parent_span_id FROM {own:Identifier}.otel_step_children_read)
