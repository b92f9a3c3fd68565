-- otel_events_append.sql on a server that knows query_plan_fuse_filter_into_array_join
-- (chDB 4.4 does; servers before it reject the setting): off, as the filter of
-- otel_events.sql, fused into the ARRAY JOIN of the step records (otel_span_records.sql),
-- is evaluated per array element with every field picked again, which made the append
-- take four times as long.
INSERT INTO {own:Identifier}.events
SELECT * FROM {own:Identifier}.otel_events
SETTINGS max_partitions_per_insert_block = 0, optimize_on_insert = 0,
    query_plan_fuse_filter_into_array_join = 0
