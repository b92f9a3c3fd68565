-- The jobs derived again: every job of the rows found (all of whose rows were found).
CREATE OR REPLACE TABLE derive_work_all_jobs ENGINE = Memory AS
SELECT DISTINCT unit FROM (
    SELECT unit FROM derive_work_jobs
    UNION ALL
    SELECT assumeNotNull(job_id) AS unit FROM derive_work_found WHERE job_id IS NOT NULL
)
