-- The keys the new rows touch: their job_ids (a job without a key is its own), and every
-- idempotency key those jobs' rows or the new rows carry (a job whose key changed leaves
-- its old key).
CREATE OR REPLACE TABLE derive_work_keys ENGINE = Memory AS
SELECT DISTINCT unit FROM (
    SELECT unit FROM derive_work_jobs
    UNION ALL
    SELECT assumeNotNull(idempotency_key) AS unit
    FROM derive_work_own
    WHERE idempotency_key IS NOT NULL AND job_id IN (SELECT unit FROM derive_work_jobs)
    UNION ALL
    SELECT assumeNotNull(idempotency_key) AS unit
    FROM derive_work_batch
    WHERE idempotency_key IS NOT NULL
)
