-- The duplicate runs the duplicates answer of those keys reads: the touched keys' as
-- derived now, the other holders' keys' as kept (the batch changed only their lock
-- incidents).
CREATE OR REPLACE TABLE derive_work_answer_runs ENGINE = Memory AS
SELECT * FROM derive_work_derived_duplicate_runs
WHERE key IN (SELECT unit FROM derive_work_keys)
UNION ALL
SELECT * FROM derived_duplicate_runs
WHERE key IN (SELECT unit FROM derive_work_answer_keys)
  AND key NOT IN (SELECT unit FROM derive_work_keys)
