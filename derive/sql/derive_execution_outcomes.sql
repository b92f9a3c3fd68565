-- One row per execution with its raw aggregates and outcome (`terminal`, the time of its
-- own failure): the stage `derive_executions` compares executions of one job_id with.
-- Materialised as `derived_outcomes` during a build, so the comparisons below read it
-- instead of aggregating the events again for every reference.
WITH per_execution AS (
    SELECT
        execution_uid,
        max(job_id) AS job_id,
        max(key) AS key,
        max(job_type) AS job_type,
        max(queue) AS queue,
        coalesce(max(worker_id) FILTER (WHERE event = 'deliver'), max(worker_id)) AS worker_id,
        coalesce(max(delivery_attempt) FILTER (WHERE event = 'deliver'),
                 max(delivery_attempt)) AS attempt,
        max(resource_key) AS resource_key,
        coalesce(min(ts_us) FILTER (WHERE event = 'deliver'), min(ts_us)) AS start_us,
        greatest(max(ts_us), coalesce(max(span_end_us), 0)) AS end_us,
        -- The end of what the run said itself: a settlement on its behalf once its worker
        -- was found lost (Celery's main process logs WorkerLostError seconds after the
        -- pool process died) is no sign that it was still running then.
        greatest(
            coalesce(max(ts_us) FILTER (WHERE NOT (event IN ('nack', 'fail') AND (
                regexp_matches(coalesce(reason, ''), '(?i)worker.?lost|lost.?worker')
                OR coalesce(settled_by, coalesce(worker_id, '')) <> coalesce(worker_id, '')
            ))), min(ts_us)),
            coalesce(max(span_end_us), 0)
        ) AS own_end_us,
        min(ts_us) AS first_event_us,
        max(visibility_timeout_ms) FILTER (WHERE event = 'deliver') AS visibility_timeout_ms,
        min(ts_us) FILTER (WHERE event = 'ack') AS first_ack_us,
        max(ts_us) FILTER (WHERE event = 'ack') AS last_ack_us,
        max(ts_us) FILTER (WHERE event = 'nack') AS last_nack_us,
        max(ts_us) FILTER (WHERE event = 'fail') AS last_fail_us,
        countIf(event IN ('nack', 'fail') AND (
            regexp_matches(coalesce(reason, ''), '(?i)worker.?lost|lost.?worker')
            OR coalesce(settled_by, coalesce(worker_id, '')) <> coalesce(worker_id, '')
        )) AS lost_worker_settlements,
        countIf(event = 'side_effect') AS side_effect_events,
        -- Whether the run said anything of its effect: without such evidence on any run of
        -- a key, harmful or absorbed cannot be told (outcome `unknown`).
        countIf(event IN ('side_effect', 'idempotency_hit', 'lock_contended', 'occ_conflict',
                          'commit')) AS effect_evidence_events,
        max(ts_us) FILTER (WHERE event = 'side_effect') AS last_side_effect_us,
        max(ts_us) FILTER (WHERE event = 'commit') AS last_commit_us,
        countIf(event = 'idempotency_hit') AS idempotency_hits,
        countIf(event = 'lock_contended') AS lock_contentions,
        sum(wait_ms) AS lock_wait_ms,
        countIf(event = 'occ_conflict') AS occ_conflicts,
        max(lock_key) FILTER (WHERE event IN ('lock_acquire', 'lock_renew')) AS lock_key,
        max(lock_owner) FILTER (WHERE event IN ('lock_acquire', 'lock_renew')) AS lock_owner,
        min(ts_us) FILTER (WHERE event = 'lock_acquire') AS lock_acquired_us,
        min_by(lock_ttl_ms, ts_us) FILTER (WHERE event = 'lock_acquire') AS lock_ttl_ms,
        max_by(ts_us + lock_ttl_ms * 1000, ts_us)
            FILTER (WHERE event IN ('lock_acquire', 'lock_renew') AND lock_ttl_ms IS NOT NULL)
            AS lock_valid_until_us,
        countIf(event = 'lock_renew') AS lock_renewals,
        max(ts_us) FILTER (WHERE event = 'lock_release'
                           AND coalesce(released, 'true') NOT IN ('false', '0'))
            AS lock_released_us,
        countIf(event = 'lock_release' AND released IN ('false', '0')) AS lock_release_mismatches,
        min(ts_us) FILTER (WHERE event = 'lock_expired') AS lock_expired_event_us
    FROM event_facts
    WHERE execution_uid IS NOT NULL
    GROUP BY execution_uid
),
outcomes AS (
    SELECT
        *,
        CASE
            WHEN first_ack_us IS NULL AND last_nack_us IS NULL AND last_fail_us IS NULL
                THEN 'none'
            WHEN coalesce(last_ack_us, -1) >= greatest(coalesce(last_nack_us, -1),
                                                       coalesce(last_fail_us, -1)) THEN 'ack'
            WHEN coalesce(last_nack_us, -1) >= coalesce(last_fail_us, -1) THEN 'nack'
            ELSE 'fail'
        END AS terminal,
        CASE
            WHEN lost_worker_settlements > 0 THEN NULL
            ELSE greatest(coalesce(last_nack_us, 0), coalesce(last_fail_us, 0))
        END AS own_failure_us
    FROM per_execution
)
SELECT * FROM outcomes
