-- One row per execution (one run of a job's body, from its `deliver` to its last event),
-- with what every forensic question asks of it: timing, outcome, lock validity, and which
-- duplicate causes its delivery had (judged against the earlier executions of its job_id).
-- Read from `derived_outcomes` (the per-execution aggregates of `event_facts`, built just
-- before); materialised once per store snapshot as `derived_executions`.
-- Times are integer microseconds since the epoch (`*_us`), the same in both dialects.
WITH earlier AS (
    -- For each execution, what the earlier executions of its job_id had done by its start.
    SELECT
        later.execution_uid AS execution_uid,
        -- Still running: by its own events, not by a settlement made for it later.
        countIf(before.own_end_us > later.start_us) AS earlier_still_running,
        countIf(before.terminal = 'none' OR before.lost_worker_settlements > 0)
            AS earlier_crashed,
        countIf(before.first_ack_us <= later.start_us) AS earlier_acked,
        countIf(before.terminal IN ('nack', 'fail') AND before.own_failure_us > 0
                AND before.own_failure_us <= later.start_us) AS earlier_failed
    FROM derived_outcomes AS later
    JOIN derived_outcomes AS before ON before.job_id = later.job_id
    WHERE before.start_us < later.start_us
       OR (before.start_us = later.start_us AND before.execution_uid < later.execution_uid)
    GROUP BY later.execution_uid
),
enqueued AS (
    -- Producer-side identities of each key: two job_ids for one key is a producer retry.
    SELECT coalesce(idempotency_key, job_id) AS key, count(DISTINCT job_id) AS enqueued_jobs
    FROM events
    WHERE event = 'enqueue' AND job_id IS NOT NULL
    GROUP BY coalesce(idempotency_key, job_id)
),
attempts AS (
    -- Attempt numbers that left no events at all (a killed process that never exported).
    SELECT
        execution_uid,
        greatest(coalesce(attempt, 0)
                 - coalesce(lag(attempt) OVER (PARTITION BY job_id ORDER BY start_us,
                                                                           execution_uid), 0)
                 - 1, 0) AS missing_attempts_before
    FROM derived_outcomes
)
SELECT
    o.execution_uid AS execution_uid,
    o.job_id AS job_id,
    o.key AS key,
    o.job_type AS job_type,
    o.queue AS queue,
    o.worker_id AS worker_id,
    o.attempt AS attempt,
    o.resource_key AS resource_key,
    o.start_us AS start_us,
    o.end_us AS end_us,
    (o.end_us - o.start_us) / 1000.0 AS duration_ms,
    o.first_event_us AS first_event_us,
    o.terminal AS terminal,
    o.first_ack_us AS first_ack_us,
    o.lost_worker_settlements > 0 AS lost_worker,
    o.side_effect_events AS side_effect_events,
    o.side_effect_events > 0 AS had_side_effect,
    o.effect_evidence_events > 0 AS had_effect_evidence,
    o.idempotency_hits > 0 AS idempotency_hit,
    o.lock_contentions > 0 AS lock_contended,
    o.lock_wait_ms AS lock_wait_ms,
    o.occ_conflicts > 0 AS occ_conflict,
    o.last_side_effect_us AS last_side_effect_us,
    o.last_commit_us AS last_commit_us,
    o.last_ack_us AS last_ack_us,
    o.lock_key AS lock_key,
    o.lock_owner AS lock_owner,
    o.lock_acquired_us AS lock_acquired_us,
    o.lock_ttl_ms AS lock_ttl_ms,
    o.lock_valid_until_us AS lock_valid_until_us,
    o.lock_renewals AS lock_renewals,
    o.lock_released_us AS lock_released_us,
    o.lock_release_mismatches AS lock_release_mismatches,
    o.lock_expired_event_us AS lock_expired_event_us,
    -- The lock lapsed before the run ended (a release in time does not count).
    (o.lock_valid_until_us IS NOT NULL
        AND o.lock_valid_until_us < o.end_us
        AND NOT coalesce(o.lock_released_us <= o.lock_valid_until_us, false))
        AS lock_expired_while_running,
    o.visibility_timeout_ms AS visibility_timeout_ms,
    coalesce(r.earlier_still_running, 0) > 0 AS cause_visibility_timeout,
    (coalesce(r.earlier_crashed, 0) > 0 OR a.missing_attempts_before > 0) AS cause_worker_crash,
    coalesce(r.earlier_acked, 0) > 0 AS cause_broker_redelivery,
    coalesce(r.earlier_failed, 0) > 0 AS cause_retry_after_failure,
    a.missing_attempts_before AS missing_attempts_before,
    coalesce(q.enqueued_jobs, 0) AS key_enqueued_jobs
FROM derived_outcomes AS o
LEFT JOIN earlier AS r ON r.execution_uid = o.execution_uid
LEFT JOIN attempts AS a ON a.execution_uid = o.execution_uid
LEFT JOIN enqueued AS q ON q.key = o.key
