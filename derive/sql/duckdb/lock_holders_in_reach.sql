-- Which kept holders of the touched lock_keys a batch's lock incidents can involve.
--
-- Two executions meet in a lock incident only if their spans (fragments/lock_span.sql)
-- meet on the same lock_key: a split brain needs their holds to overlap, an overrun needs
-- the other's hold to start between the running one's lock expiry and its end.
--
-- `reached`: kept holders whose span meets a touched execution's, as the batch made it
-- (`touched_holders_new`) or as it was kept before (`touched_holders_old`): their
-- incidents may change. Every row returned also meets a reached or touched span: what
-- the reached holders' incidents are derived from. Holders that meet neither keep their
-- incidents as they are.
WITH spans AS (
    SELECT
        *,
        -- include: lock_span
    FROM lock_holder_candidates
),
touched AS (
    SELECT
        lock_key,
        -- include: lock_span
    FROM (SELECT lock_key, lock_acquired_us, lock_valid_until_us, end_us
          FROM touched_holders_new
          UNION ALL
          SELECT lock_key, lock_acquired_us, lock_valid_until_us, end_us
          FROM touched_holders_old)
    WHERE lock_key IS NOT NULL
),
reached AS (
    SELECT DISTINCT spans.execution_uid
    FROM spans
    JOIN touched ON touched.lock_key = spans.lock_key
        AND spans.lo <= touched.hi AND touched.lo <= spans.hi
),
reaching AS (
    SELECT lock_key, lo, hi FROM spans
    WHERE execution_uid IN (SELECT execution_uid FROM reached)
    UNION ALL
    SELECT lock_key, lo, hi FROM touched
),
involved AS (
    SELECT DISTINCT spans.execution_uid
    FROM spans
    JOIN reaching ON reaching.lock_key = spans.lock_key
        AND spans.lo <= reaching.hi AND reaching.lo <= spans.hi
)
SELECT
    spans.* EXCLUDE (lo, hi),
    spans.execution_uid IN (SELECT execution_uid FROM reached) AS reached
FROM spans
WHERE spans.execution_uid IN (SELECT execution_uid FROM involved)
