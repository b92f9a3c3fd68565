-- The lock incidents of the executions a watch tick looks at (queries.derived.only).
CREATE OR REPLACE TEMP TABLE only_derived_lock_incidents AS
SELECT *
FROM derived_lock_incidents
WHERE execution_uid IN (SELECT unit FROM only_executions)
   OR execution_uid IN (SELECT execution_uid FROM only_derived_executions)
