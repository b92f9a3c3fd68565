-- Cache stampedes: many executions on one resource_key starting within one short window
-- (windows are fixed buckets of window_us), with how many of them ran the effect.
-- param window_us: Int64
-- param min_executions: Int64
SELECT
    resource_key,
    CAST(floor(start_us / :window_us) AS BIGINT) * :window_us AS window_start_us,
    max(job_type) AS job_type,
    count(*) AS executions,
    count(DISTINCT key) AS keys,
    countIf(had_side_effect) AS side_effects
FROM derived_executions
WHERE
    -- include: execution_filters
    AND resource_key IS NOT NULL
GROUP BY resource_key, window_start_us
HAVING count(*) >= :min_executions
ORDER BY window_start_us, resource_key
