-- The spans (fragments/lock_span.sql) of the touched keys' executions on their
-- lock_keys, as the batch made them and as they were kept before. Two executions meet in
-- a lock incident only if their spans meet on one lock_key
-- (queries/sql/duckdb/lock_holders_in_reach.sql).
CREATE OR REPLACE TABLE derive_work_lock_spans ENGINE = Memory AS
SELECT
    assumeNotNull(lock_key) AS lock_key,
    -- include: lock_span
FROM (
    SELECT lock_key, lock_acquired_us, lock_valid_until_us, end_us
    FROM derive_work_derived_executions
    WHERE key IN (SELECT unit FROM derive_work_keys)
    UNION ALL
    SELECT lock_key, lock_acquired_us, lock_valid_until_us, end_us
    FROM derived_executions
    WHERE key IN (SELECT unit FROM derive_work_keys)
      AND lock_key IN (SELECT unit FROM derive_work_locks)
)
WHERE lock_key IS NOT NULL
