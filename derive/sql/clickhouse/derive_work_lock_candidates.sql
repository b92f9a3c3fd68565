-- The kept executions of the other keys holding one of the touched lock_keys, each with
-- its span (`lo`, `hi`) and no other column: a lock_key shared by a resource's every job
-- has hundreds of thousands of holders at 100M events, and reading their whole rows
-- took 2 s where their spans take a quarter of that (derive_work_holders reads the
-- whole rows of the few it keeps). The other keys come from the kept rows' lock_key
-- projection (a sorted read of the few lock_keys), so only their own rows are read, not
-- every execution.
CREATE OR REPLACE TABLE derive_work_lock_candidates ENGINE = Memory AS
SELECT
    execution_uid,
    key,
    lock_key,
    -- include: lock_span
FROM derived_executions
WHERE key IN (
        SELECT key FROM derived_executions_rows
        WHERE lock_key IN (SELECT unit FROM derive_work_locks)
    )
  AND lock_key IN (SELECT unit FROM derive_work_locks)
  AND key IS NOT NULL AND key NOT IN (SELECT unit FROM derive_work_keys)
