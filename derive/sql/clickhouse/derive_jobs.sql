-- ClickHouse spelling (reads event_facts, whose ts_us both dialects share).
-- One row per job_id that was written to an outbox or enqueued: when it first was each, its
-- job type and queue. The checklist's outbox lag and clock skew read it instead of the
-- events. Materialised once per store snapshot as `derived_jobs`.
SELECT
    job_id,
    max(job_type) AS job_type,
    max(queue) AS queue,
    min(ts_us) FILTER (WHERE event = 'outbox_write') AS written_us,
    min(ts_us) FILTER (WHERE event = 'enqueue') AS enqueued_us
FROM event_facts
WHERE event IN ('outbox_write', 'enqueue') AND job_id IS NOT NULL
GROUP BY job_id
