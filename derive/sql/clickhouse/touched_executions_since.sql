-- The executions whose lock incidents derivations wrote since row version `version`.
-- param version: UInt64
SELECT DISTINCT execution_uid AS unit
FROM derived_lock_incidents_rows
WHERE _version > :version
