-- The rows read (inserted since the window before `high`), each event once as `FINAL`
-- would give it: its newest insert.
CREATE OR REPLACE TABLE derive_work_recent ENGINE = MergeTree ORDER BY tuple() AS
SELECT * EXCEPT (ingested_at)
FROM derive_work_read
ORDER BY ingested_at DESC
LIMIT 1 BY ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid
