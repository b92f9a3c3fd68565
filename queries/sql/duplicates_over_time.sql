-- How many keys ran more than once per time bucket and job type, how many extra runs
-- they had, and how many were harmful: the shape of the duplicate rate over time.
-- A key is counted in the bucket of its first run.
-- param bucket_us: Int64
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
WITH selected AS (
    SELECT *
    FROM derived_executions
    WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
),
per_key AS (
    SELECT
        key,
        max(job_type) AS job_type,
        min(start_us) AS first_us,
        count(*) + sum(missing_attempts_before) AS executions,
        countIf(had_side_effect) AS side_effects
    FROM selected
    GROUP BY key
)
SELECT
    CAST(floor(first_us / :bucket_us) AS BIGINT) * :bucket_us AS bucket_us,
    job_type,
    count(*) AS keys,
    countIf(executions > 1) AS duplicate_keys,
    sum(executions - 1) AS extra_executions,
    countIf(executions > 1 AND side_effects >= 2) AS harmful,
    countIf(executions > 1 AND side_effects < 2) AS absorbed
FROM per_key
GROUP BY bucket_us, job_type
ORDER BY bucket_us, job_type
