-- Every execution holding one of those lock_keys: the touched keys' new executions and
-- the kept executions of the other keys. The other keys come from the kept rows'
-- lock_key projection (a sorted read of the few lock_keys), so only their own rows are
-- read, not every execution.
CREATE OR REPLACE TABLE derive_work_holders ENGINE = MergeTree ORDER BY tuple() AS
SELECT * FROM derive_work_derived_executions
WHERE key IN (SELECT unit FROM derive_work_keys)
UNION ALL
SELECT * FROM derived_executions
WHERE key IN (
        SELECT key FROM derived_executions_rows
        WHERE lock_key IN (SELECT unit FROM derive_work_locks)
    )
  AND lock_key IN (SELECT unit FROM derive_work_locks)
  AND key IS NOT NULL AND key NOT IN (SELECT unit FROM derive_work_keys)
