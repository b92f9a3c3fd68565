-- The job_ids the new rows name.
CREATE OR REPLACE TABLE derive_work_jobs ENGINE = Memory AS
SELECT DISTINCT assumeNotNull(job_id) AS unit
FROM derive_work_batch
WHERE job_id IS NOT NULL
