-- Per-execution durations with the lock TTL and visibility timeout each run was given:
-- the raw material of duration histograms.
SELECT job_type, key, job_id, attempt AS delivery_attempt, worker_id, start_us,
       duration_ms, lock_ttl_ms, lock_renewals, visibility_timeout_ms, terminal
FROM derived_executions
WHERE
    -- include: execution_filters
ORDER BY job_type, start_us
