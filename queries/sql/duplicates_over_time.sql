-- How many keys ran more than once per time bucket and job type, how many extra runs
-- they had, and how many were harmful, absorbed or unknown: the shape of the duplicate rate over time.
-- A key is counted in the bucket of its first run.
WITH selected AS (
    SELECT *
    FROM derived_executions
    WHERE
        -- include: execution_filters
),
per_key AS (
    SELECT
        key,
        max(job_type) AS job_type,
        min(start_us) AS first_us,
        count(*) + sum(missing_attempts_before) AS executions,
        countIf(had_side_effect) AS side_effects,
        countIf(had_effect_evidence) AS evidenced
    FROM selected
    GROUP BY key
)
-- include: duplicate_buckets
