-- The rows to derive: those inserted after `since` (the old `high`; `back` seconds before
-- it when a row turned up late in the window before it), each once.
-- param since: String
-- param back: UInt32
CREATE OR REPLACE TABLE derive_work_batch ENGINE = MergeTree ORDER BY tuple() AS
SELECT * EXCEPT (ingested_at)
FROM derive_work_read
WHERE ingested_at > toDateTime64(:since, 6) - toIntervalSecond(:back)
ORDER BY ingested_at DESC
LIMIT 1 BY ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid
