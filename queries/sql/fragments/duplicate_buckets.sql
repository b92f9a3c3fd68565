-- Keys per time bucket and job type: how many, how many ran more than once, their extra
-- runs, and how many of those were harmful or absorbed. Reads `per_key` (key, job_type,
-- first_us, executions, side_effects), which the including query defines.
-- param bucket_us: Int64
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
