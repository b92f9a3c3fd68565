-- duplicates_over_time with no filter set: the same buckets from the per-key table kept
-- with the derived tables (derive_key_runs.sql) instead of grouping every execution.
-- param bucket_us: Int64
SELECT
    CAST(floor(first_us / :bucket_us) AS BIGINT) * :bucket_us AS bucket_us,
    job_type,
    count(*) AS keys,
    countIf(executions > 1) AS duplicate_keys,
    sum(executions - 1) AS extra_executions,
    countIf(executions > 1 AND side_effects >= 2) AS harmful,
    countIf(executions > 1 AND side_effects < 2) AS absorbed
FROM derived_key_runs
GROUP BY bucket_us, job_type
ORDER BY bucket_us, job_type
