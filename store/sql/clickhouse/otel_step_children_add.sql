-- The step child spans of the rows a refresh reads, kept.
INSERT INTO {own:Identifier}.otel_step_children (parent_span_id, trace_id, day)
SELECT parent_span_id, trace_id, day FROM {own:Identifier}.otel_step_children_read
SETTINGS max_partitions_per_insert_block = 0
