-- Every execution holding one of those lock_keys: the touched keys' new executions and
-- the kept executions of the other keys (a filtered read of the executions).
CREATE OR REPLACE TABLE derive_work_holders ENGINE = MergeTree ORDER BY tuple() AS
SELECT * FROM derive_work_derived_executions
WHERE key IN (SELECT unit FROM derive_work_keys)
UNION ALL
SELECT * FROM derived_executions
WHERE lock_key IN (SELECT unit FROM derive_work_locks)
  AND key IS NOT NULL AND key NOT IN (SELECT unit FROM derive_work_keys)
