-- The kept holders of the touched lock_keys whose span (fragments/lock_span.sql) ends in
-- [$since, $until) ($until null: from $since on).
--
-- A span ends at the later of end_us and the lock's expiry, and a bound on that
-- expression prunes nothing. Each branch below bounds one column (an OR on one column
-- prunes too), so the row groups of the kept executions (a base is written in order of
-- end_us) that ended before $since are skipped by their statistics; the branches are
-- disjoint.
WITH kept AS (
    SELECT execution_uid, key, lock_key, lock_owner, lock_acquired_us, lock_valid_until_us,
           lock_released_us, end_us, lock_expired_while_running
    FROM derived_executions
    WHERE lock_key IN (SELECT unit FROM touched_locks)
        AND (end_us >= $since OR end_us IS NULL)
    UNION ALL
    SELECT execution_uid, key, lock_key, lock_owner, lock_acquired_us, lock_valid_until_us,
           lock_released_us, end_us, lock_expired_while_running
    FROM derived_executions
    WHERE lock_key IN (SELECT unit FROM touched_locks)
        AND lock_valid_until_us >= $since AND end_us < $since
),
spans AS (
    SELECT
        *,
        -- include: lock_span
    FROM kept
)
SELECT * EXCLUDE (lo, hi) FROM spans WHERE $until IS NULL OR hi < $until
