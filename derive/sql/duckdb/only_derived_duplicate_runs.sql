-- The duplicate runs of the keys a watch tick looks at (queries.derived.only).
CREATE OR REPLACE TEMP TABLE only_derived_duplicate_runs AS
SELECT *
FROM derived_duplicate_runs
WHERE key IN (SELECT unit FROM only_keys)
