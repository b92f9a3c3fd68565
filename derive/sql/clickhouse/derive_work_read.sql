-- The rows inserted since the window before `high` (the minmax index on ingested_at skips
-- every part older than that): what a derivation reads of `events` besides the history of
-- the keys these rows touch.
-- param high: String
-- param window: UInt32
CREATE OR REPLACE TABLE derive_work_read ENGINE = MergeTree ORDER BY tuple() AS
SELECT *, ingested_at
FROM events
WHERE ingested_at > toDateTime64(:high, 6) - toIntervalSecond(:window)
