-- Which keys (idempotency key, else job_id) ran more than once, how many times, whether
-- two or more runs emitted side effects (harmful) or the extras were absorbed, and which
-- causes apply (flags, in the contract's priority order; the caller names the first).
-- Filters select executions; a key is a duplicate when it has more than one selected run.
-- An attempt number that arrives with earlier attempts missing counts them as runs too.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
WITH selected AS (
    SELECT *
    FROM derived_executions
    WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
),
per_key AS (
    SELECT
        key,
        count(*) + sum(missing_attempts_before) AS executions,
        count(*) AS observed_executions
    FROM selected
    GROUP BY key
),
duplicate_runs AS (
    SELECT s.*
    FROM selected AS s
    JOIN per_key AS k ON k.key = s.key
    WHERE k.executions > 1
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
    d.key AS key,
    max(d.job_type) AS job_type,
    max(d.queue) AS queue,
    count(*) + sum(d.missing_attempts_before) AS executions,
    countIf(d.had_side_effect) AS side_effects,
    countIf(d.had_side_effect) >= 2 AS harmful,
    array_agg(DISTINCT d.job_id) AS job_ids,
    min(d.start_us) AS first_us,
    max(d.end_us) AS last_us,
    count(DISTINCT d.job_id) >= 2 OR max(d.key_enqueued_jobs) >= 2 AS producer_retry,
    countIf(d.cause_visibility_timeout) > 0 AS visibility_timeout,
    countIf(d.cause_worker_crash) > 0 AS worker_crash,
    countIf(d.cause_broker_redelivery) > 0 AS broker_redelivery,
    countIf(d.cause_retry_after_failure) > 0 AS retry_after_failure,
    countIf(coalesce(i.overruns, 0) > 0) > 0 AS lock_expired_while_running,
    countIf(coalesce(i.overlaps, 0) > 0) > 0 AS overlapped,
    countIf(coalesce(i.split_brains, 0) > 0) > 0 AS split_brain
FROM duplicate_runs AS d
LEFT JOIN incidents AS i ON i.execution_uid = d.execution_uid
GROUP BY d.key
ORDER BY first_us, key
