-- Every row, however old, whose job_id or idempotency key is one of the units listed:
-- - the (key, job_id) pairs that have rows from before the read, by the id index
--   (events_ids: each pair under its job_id and under its key, with its first insert),
--   read from `events` by its sort key, in the days the index lists them (so the days
--   the batch's pairs never touched are not looked at): a pair with no older row costs
--   nothing here;
-- - every other pair's rows from the read itself, which holds all of them.
-- param high: String
-- param window: UInt32
CREATE OR REPLACE TABLE {target:Identifier} ENGINE = MergeTree ORDER BY tuple() AS
WITH older AS (
    SELECT idempotency_key, job_id
    FROM events_ids
    WHERE value IN (SELECT unit FROM {units:Identifier})
    GROUP BY idempotency_key, job_id
    HAVING min(first_ingested) <= toDateTime64(:high, 6) - toIntervalSecond(:window)
)
SELECT *
FROM events FINAL
WHERE toDate(ts) IN (
        SELECT day FROM events_ids
        WHERE value IN (SELECT unit FROM {units:Identifier})
          AND (idempotency_key, job_id) IN (SELECT * FROM older))
  AND (ifNull(idempotency_key, ''), ifNull(job_id, '')) IN (SELECT * FROM older)
UNION ALL
SELECT * EXCEPT (ingested_at)
FROM derive_work_read
WHERE (job_id IN (SELECT unit FROM {units:Identifier})
       OR idempotency_key IN (SELECT unit FROM {units:Identifier}))
  AND (ifNull(idempotency_key, ''), ifNull(job_id, '')) NOT IN (SELECT * FROM older)
-- Each event once, as `FINAL` would give it: its newest insert.
ORDER BY ingested_at DESC
LIMIT 1 BY ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid
