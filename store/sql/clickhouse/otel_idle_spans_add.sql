-- The spans of the rows a refresh reads that name a job and record no event, kept.
INSERT INTO {own:Identifier}.otel_idle_spans (span_id, trace_id, day)
SELECT span_id, trace_id, toDate(start_ts)
FROM {own:Identifier}.otel_span_kinds_stage
WHERE own_event = ''
SETTINGS max_partitions_per_insert_block = 0
