-- The other jobs of those keys: every row of theirs is read next (a job's rows need not
-- all carry its key).
CREATE OR REPLACE TABLE derive_work_rest_units ENGINE = Memory AS
SELECT DISTINCT assumeNotNull(job_id) AS unit
FROM (SELECT job_id FROM derive_work_own UNION ALL SELECT job_id FROM derive_work_keyed)
WHERE job_id IS NOT NULL
  AND job_id NOT IN (SELECT unit FROM derive_work_jobs)
  AND job_id NOT IN (SELECT unit FROM derive_work_keys)
