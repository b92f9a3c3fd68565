-- The executions a watch tick looks at: those of the keys batches derived again since
-- the last tick, and every holder of a lock_key their runs held (`only_keys`,
-- `only_executions`: see queries.derived.only).
CREATE OR REPLACE VIEW only_derived_executions AS
SELECT *
FROM derived_executions
WHERE key IN (SELECT unit FROM only_keys)
   OR execution_uid IN (SELECT unit FROM only_executions)
