-- The rows inserted after `high` less `window` seconds (the minmax index on ingested_at
-- skips every part older than that): what a derivation reads of `events` besides the
-- history of the keys these rows touch. The window is the one before `high` where a row
-- turned up late in it (derive_window_summary.sql), else none: after a first read of the
-- Collector's tables that window holds the read's last chunk, millions of rows derived
-- already.
-- param high: String
-- param window: UInt32
CREATE OR REPLACE TABLE derive_work_read ENGINE = MergeTree ORDER BY tuple() AS
SELECT *, ingested_at
FROM events
WHERE ingested_at > toDateTime64(:high, 6) - toIntervalSecond(:window)
