-- On a first read, which reads everything: the parents named by the step child spans read.
INSERT INTO {own:Identifier}.otel_step_parents (parent_span_id)
SELECT DISTINCT parent_span_id FROM {own:Identifier}.otel_step_children_read
