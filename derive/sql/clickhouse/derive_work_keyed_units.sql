-- The touched keys that are no job_id of the new rows: every row of theirs is read next
-- (their other jobs).
CREATE OR REPLACE TABLE derive_work_keyed_units ENGINE = Memory AS
SELECT unit FROM derive_work_keys WHERE unit NOT IN (SELECT unit FROM derive_work_jobs)
