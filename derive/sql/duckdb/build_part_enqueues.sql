-- The enqueues of one part's keys, as the `events` derive_executions.sql counts them
-- from (see build_parts.sql).
SELECT event, job_id, idempotency_key
FROM build_part_rows
WHERE NOT build_event
