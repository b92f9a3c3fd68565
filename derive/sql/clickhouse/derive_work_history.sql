-- Every row, however old, whose job_id or idempotency key is one of the units listed:
-- - the (key, job_id) pairs that have rows from before the read (derive_work_older),
--   read from `events` by its sort key, in the days the index lists them (so the days
--   the batch's pairs never touched are not looked at): a pair with no older row costs
--   nothing here;
-- - every other pair's rows from the read itself, which holds all of them.
CREATE OR REPLACE TABLE {target:Identifier} ENGINE = Memory AS
SELECT *
FROM events FINAL
WHERE toDate(ts) IN (SELECT arrayJoin(days) FROM derive_work_older)
  AND (ifNull(idempotency_key, ''), ifNull(job_id, ''))
      IN (SELECT idempotency_key, job_id FROM derive_work_older)
UNION ALL
SELECT * EXCEPT (ingested_at)
FROM derive_work_read
WHERE (job_id IN (SELECT unit FROM {units:Identifier})
       OR idempotency_key IN (SELECT unit FROM {units:Identifier}))
  AND (ifNull(idempotency_key, ''), ifNull(job_id, ''))
      NOT IN (SELECT idempotency_key, job_id FROM derive_work_older)
-- Each event once, as `FINAL` would give it: its newest insert.
ORDER BY ingested_at DESC
LIMIT 1 BY ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid
