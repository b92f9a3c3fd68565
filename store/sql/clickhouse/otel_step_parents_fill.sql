-- The parents, among the spans read, of every step child span kept: found through the
-- kept children's sort key, so the cost is the read's, not the history's.
INSERT INTO {own:Identifier}.otel_step_parents (parent_span_id)
SELECT DISTINCT parent_span_id
FROM {own:Identifier}.otel_step_children
WHERE parent_span_id IN (SELECT span_id FROM {own:Identifier}.otel_spans)
