-- The executions of every key (idempotency key, else job_id) that ran more than once: what
-- `duplicates` groups (with each run's lock findings, from `derived_lock_incidents`, so
-- that a row here depends on its key's executions alone). A key that is a duplicate among
-- the executions a filter selects is one among all of them, so every filtered question
-- reads this small table too. Materialised once per store snapshot as
-- `derived_duplicate_runs`.
WITH duplicate_keys AS (
    SELECT key
    FROM derived_executions
    GROUP BY key
    HAVING count(*) + sum(missing_attempts_before) > 1
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
    e.had_effect_evidence AS had_effect_evidence,
    e.missing_attempts_before AS missing_attempts_before,
    e.key_enqueued_jobs AS key_enqueued_jobs,
    e.cause_visibility_timeout AS cause_visibility_timeout,
    e.cause_worker_crash AS cause_worker_crash,
    e.cause_broker_redelivery AS cause_broker_redelivery,
    e.cause_retry_after_failure AS cause_retry_after_failure
FROM derived_executions AS e
WHERE e.key IN (SELECT key FROM duplicate_keys)
ORDER BY e.key, e.start_us
