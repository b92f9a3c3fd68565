-- The runs of every duplicated key, with what the what-if replay (queries/whatif.py)
-- judges them by: how long each ran and how it ended, the visibility timeout it was
-- delivered under, its lock's grant, TTL and validity, its cause flags, and the run that
-- took its lock while it still ran (`overlapped_by_uid`, from the lock incidents), and
-- whether it gave up on a held lock after waiting (`lock_contended`, `lock_wait_ms`).
-- Filters select runs, as `duplicates` does; `key` (NULL: every key) one key's runs, for
-- the settings that would have prevented one incident. Reads the derived tables only.
-- param key: String
WITH overruns AS (
    SELECT execution_uid AS overrun_uid, max(other_uid) AS overlapped_by_uid
    FROM derived_lock_incidents
    WHERE rule = 'lock_expired_while_running' AND other_uid IS NOT NULL
    GROUP BY execution_uid
),
runs AS (
    SELECT
        e.execution_uid AS execution_uid,
        e.key AS key,
        e.job_id AS job_id,
        e.job_type AS job_type,
        e.queue AS queue,
        e.start_us AS start_us,
        e.end_us AS end_us,
        e.terminal AS terminal,
        e.lost_worker AS lost_worker,
        e.had_side_effect AS had_side_effect,
        e.lock_contended AS lock_contended,
        e.lock_wait_ms AS lock_wait_ms,
        e.visibility_timeout_ms AS visibility_timeout_ms,
        e.lock_key AS lock_key,
        e.lock_acquired_us AS lock_acquired_us,
        e.lock_ttl_ms AS lock_ttl_ms,
        e.lock_valid_until_us AS lock_valid_until_us,
        e.lock_released_us AS lock_released_us,
        e.lock_expired_while_running AS lock_expired_while_running,
        e.missing_attempts_before AS missing_attempts_before,
        e.key_enqueued_jobs AS key_enqueued_jobs,
        e.cause_visibility_timeout AS cause_visibility_timeout,
        e.cause_worker_crash AS cause_worker_crash,
        e.cause_broker_redelivery AS cause_broker_redelivery,
        e.cause_retry_after_failure AS cause_retry_after_failure
    FROM derived_executions AS e
    WHERE e.key IN (SELECT key FROM derived_duplicate_runs)
      AND (:key IS NULL OR e.key = :key)
)
SELECT runs.*, o.overlapped_by_uid AS overlapped_by_uid
FROM runs
LEFT JOIN overruns AS o ON o.overrun_uid = runs.execution_uid
WHERE
    -- include: execution_filters
ORDER BY key, start_us, execution_uid
