-- The executions of every key (idempotency key, else job_id) that ran more than once, with
-- the lock findings of each run: what `duplicates` groups. A key that is a duplicate among
-- the executions a filter selects is one among all of them, so every filtered question
-- reads this small table too. Materialised once per store snapshot as
-- `derived_duplicate_runs`.
WITH duplicate_keys AS (
    SELECT key
    FROM derived_executions
    GROUP BY key
    HAVING count(*) + sum(missing_attempts_before) > 1
),
incidents AS (
    SELECT
        execution_uid,
        countIf(rule = 'lock_expired_while_running') AS overruns,
        countIf(rule = 'lock_expired_while_running' AND other_owner IS NOT NULL) AS overlaps,
        countIf(rule = 'split_brain') AS split_brains
    FROM derived_lock_incidents
    GROUP BY execution_uid
)
SELECT
    e.execution_uid AS execution_uid,
    e.key AS key,
    e.job_id AS job_id,
    e.job_type AS job_type,
    e.queue AS queue,
    e.start_us AS start_us,
    e.end_us AS end_us,
    e.had_side_effect AS had_side_effect,
    e.missing_attempts_before AS missing_attempts_before,
    e.key_enqueued_jobs AS key_enqueued_jobs,
    e.cause_visibility_timeout AS cause_visibility_timeout,
    e.cause_worker_crash AS cause_worker_crash,
    e.cause_broker_redelivery AS cause_broker_redelivery,
    e.cause_retry_after_failure AS cause_retry_after_failure,
    coalesce(i.overruns, 0) > 0 AS lock_overrun,
    coalesce(i.overlaps, 0) > 0 AS lock_overlapped,
    coalesce(i.split_brains, 0) > 0 AS lock_split_brain
FROM derived_executions AS e
LEFT JOIN incidents AS i ON i.execution_uid = e.execution_uid
WHERE e.key IN (SELECT key FROM duplicate_keys)
ORDER BY e.key, e.start_us
