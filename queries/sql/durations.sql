-- How long each job type runs (p50/p95/p99/max) against the lock TTL and visibility
-- timeout in force (the values of its latest execution): the headroom left, and the share
-- of executions that ran longer than their own lock TTL or visibility timeout.
SELECT
    job_type,
    count(*) AS executions,
    -- include: duration_quantiles
    max(duration_ms) AS max_ms,
    max_by(lock_ttl_ms, start_us) FILTER (WHERE lock_ttl_ms IS NOT NULL) AS lock_ttl_ms,
    max_by(visibility_timeout_ms, start_us) FILTER (WHERE visibility_timeout_ms IS NOT NULL)
        AS visibility_timeout_ms,
    countIf(lock_renewals > 0) AS renewed_executions,
    countIf(duration_ms > lock_ttl_ms) / greatest(countIf(lock_ttl_ms IS NOT NULL), 1)
        AS share_over_lock_ttl,
    countIf(duration_ms > visibility_timeout_ms)
        / greatest(countIf(visibility_timeout_ms IS NOT NULL), 1) AS share_over_visibility
FROM derived_executions
WHERE
    -- include: execution_filters
GROUP BY job_type
ORDER BY job_type
