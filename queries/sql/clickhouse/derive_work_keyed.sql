-- Every row of the touched keys that are no job_id of the new rows (their other jobs).
CREATE OR REPLACE TABLE derive_work_keyed ENGINE = MergeTree ORDER BY tuple() AS
WITH others AS (
    SELECT unit FROM derive_work_keys WHERE unit NOT IN (SELECT unit FROM derive_work_jobs)
)
SELECT * FROM events FINAL WHERE idempotency_key IN (SELECT unit FROM others)
UNION ALL
SELECT * FROM events FINAL WHERE job_id IN (SELECT unit FROM others)
