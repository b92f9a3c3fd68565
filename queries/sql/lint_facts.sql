-- What the settings linter judges per job type: how many runs held a lock and renewed
-- it, how many jobs with no idempotency key were delivered more than once, and how many
-- lock releases found their token no longer matched.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
WITH selected AS (
    SELECT * FROM derived_executions WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
),
redelivered AS (
    SELECT job_id, max(job_type) AS job_type
    FROM selected
    WHERE key = job_id
    GROUP BY job_id
    HAVING count(*) + sum(missing_attempts_before) > 1
)
SELECT
    s.job_type AS job_type,
    count(*) AS executions,
    countIf(s.lock_key IS NOT NULL) AS locked_executions,
    countIf(s.lock_renewals > 0) AS renewed_executions,
    sum(s.lock_release_mismatches) AS release_mismatches,
    max(r.jobs) AS redelivered_without_key
FROM selected AS s
LEFT JOIN (SELECT job_type, count(*) AS jobs FROM redelivered GROUP BY job_type) AS r
    ON r.job_type = s.job_type
GROUP BY s.job_type
ORDER BY job_type
