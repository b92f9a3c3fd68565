-- The (key, job_id) pairs of the listed units that have rows from before the read, with
-- the days they have rows in, from the id index (events_ids: each pair under its job_id
-- and under its key, with its first insert). Kept as a table because the history read
-- (derive_work_history.sql) asks for it three times: as a CTE, ClickHouse looked the
-- units up in the index each time, 0.3 s each for a batch's 1,250 random job_ids at
-- 100M events.
-- param high: String
-- param window: UInt32
CREATE OR REPLACE TABLE derive_work_older ENGINE = Memory AS
SELECT idempotency_key, job_id, groupUniqArray(day) AS days
FROM events_ids
WHERE value IN (SELECT unit FROM {units:Identifier})
GROUP BY idempotency_key, job_id
HAVING min(first_ingested) <= toDateTime64(:high, 6) - toIntervalSecond(:window)
