-- Keys per time bucket and job type: how many, how many ran more than once, their extra
-- runs, and how many of those were harmful, absorbed, or of unknown outcome (no run said
-- anything of its effect). Reads `per_key` (key, job_type, first_us, executions,
-- side_effects, evidenced), which the including query defines.
-- param bucket_us: Int64
SELECT
    CAST(floor(first_us / :bucket_us) AS BIGINT) * :bucket_us AS bucket_us,
    job_type,
    count(*) AS keys,
    countIf(executions > 1) AS duplicate_keys,
    sum(executions - 1) AS extra_executions,
    countIf(executions > 1 AND side_effects >= 2) AS harmful,
    countIf(executions > 1 AND side_effects < 2 AND evidenced > 0) AS absorbed,
    countIf(executions > 1 AND evidenced = 0) AS unknown
FROM per_key
GROUP BY bucket_us, job_type
ORDER BY bucket_us, job_type
