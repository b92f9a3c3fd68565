-- The keys whose executions derivations wrote since row version `version` (a watch round
-- asks about those: queries.derived.touched_since); the version index skips older parts.
-- param version: UInt64
SELECT DISTINCT assumeNotNull(key) AS unit
FROM derived_executions_rows
WHERE _version > :version AND key IS NOT NULL
