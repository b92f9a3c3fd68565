-- The spans a refresh reads that are lifecycle steps as child spans (a worker step by
-- name, or by its `job.event` / `event` attribute): their parent span is an execution,
-- however much earlier or later than its children the exporter wrote it. The same rule as
-- collectors/otlp.py's step_parents, applied across every refresh.
CREATE OR REPLACE VIEW {own:Identifier}.otel_step_children_read AS
WITH
    ['lock_acquire', 'lock_contended', 'lock_renew', 'lock_release', 'lock_expired',
     'idempotency_hit', 'side_effect', 'occ_conflict', 'commit', 'ack', 'nack', 'fail']
        AS worker_steps
SELECT parent_span_id, trace_id, toDate(start_ts) AS day
FROM {own:Identifier}.otel_spans
WHERE parent_span_id != ''
    AND (span_name IN worker_steps
        OR own_attrs['job.event'] IN worker_steps
        OR own_attrs['event'] IN worker_steps)
