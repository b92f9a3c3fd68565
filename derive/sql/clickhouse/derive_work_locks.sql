-- The lock_keys the touched keys' executions hold now or held before (every lock_key
-- their jobs' rows and the new rows name).
CREATE OR REPLACE TABLE derive_work_locks ENGINE = Memory AS
SELECT DISTINCT assumeNotNull(lock_key) AS unit FROM (
    SELECT lock_key FROM derive_work_derived_executions
    WHERE key IN (SELECT unit FROM derive_work_keys)
    UNION ALL SELECT lock_key FROM derive_work_found
    UNION ALL SELECT lock_key FROM derive_work_batch
)
WHERE lock_key IS NOT NULL
