-- Every row of those jobs (and of a key spelled like one of them), however old: by the
-- job_id bloom filter and the sort key.
CREATE OR REPLACE TABLE derive_work_own ENGINE = MergeTree ORDER BY tuple() AS
SELECT * FROM events FINAL WHERE job_id IN (SELECT unit FROM derive_work_jobs)
UNION ALL
SELECT * FROM events FINAL WHERE idempotency_key IN (SELECT unit FROM derive_work_jobs)
