-- otel_step_parents_fill.sql where the step child spans kept are no more than the spans
-- read (a first read in chunks, or an exporter that writes few step child spans): the
-- same parents, found by probing the read's span ids with a set of the kept children's
-- parents instead of building a set of every span read. Where none is kept, neither runs.
INSERT INTO {own:Identifier}.otel_step_parents (parent_span_id)
SELECT DISTINCT span_id
FROM {own:Identifier}.otel_spans
WHERE span_id IN (SELECT parent_span_id FROM {own:Identifier}.otel_step_children)
