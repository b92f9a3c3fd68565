-- Which keys (idempotency key, else job_id) ran more than once, how many times, whether
-- two or more runs emitted side effects (harmful), the extras were absorbed (some run said
-- what became of its effect: side_effect, idempotency_hit, lock_contended, occ_conflict,
-- commit), or no run said anything of it (unknown: `harmful` NULL), and which causes
-- apply (flags, in the contract's priority order; the caller names the first).
-- Filters select executions; a key is a duplicate when it has more than one selected run.
-- An attempt number that arrives with earlier attempts missing counts them as runs too.
-- Reads `derived_duplicate_runs` (the runs of keys that are duplicates unfiltered) and the
-- lock incidents of those runs.
WITH incidents AS (
    SELECT
        execution_uid,
        countIf(rule = 'lock_expired_while_running') AS overruns,
        countIf(rule = 'lock_expired_while_running' AND other_owner IS NOT NULL) AS overlaps,
        countIf(rule = 'split_brain') AS split_brains
    FROM derived_lock_incidents
    GROUP BY execution_uid
),
selected AS (
    SELECT
        r.*,
        coalesce(i.overruns, 0) > 0 AS lock_overrun,
        coalesce(i.overlaps, 0) > 0 AS lock_overlapped,
        coalesce(i.split_brains, 0) > 0 AS lock_split_brain
    FROM derived_duplicate_runs AS r
    LEFT JOIN incidents AS i ON i.execution_uid = r.execution_uid
    WHERE
        -- include: execution_filters
)
SELECT
    d.key AS key,
    max(d.job_type) AS job_type,
    max(d.queue) AS queue,
    count(*) + sum(d.missing_attempts_before) AS executions,
    countIf(d.had_side_effect) AS side_effects,
    CASE
        WHEN countIf(d.had_side_effect) >= 2 THEN true
        WHEN countIf(d.had_effect_evidence) > 0 THEN false
    END AS harmful,
    CASE
        WHEN countIf(d.had_side_effect) >= 2 THEN 'harmful'
        WHEN countIf(d.had_effect_evidence) > 0 THEN 'absorbed'
        ELSE 'unknown'
    END AS outcome,
    array_agg(DISTINCT d.job_id) AS job_ids,
    min(d.start_us) AS first_us,
    max(d.end_us) AS last_us,
    count(DISTINCT d.job_id) >= 2 OR max(d.key_enqueued_jobs) >= 2 AS producer_retry,
    countIf(d.cause_visibility_timeout) > 0 AS visibility_timeout,
    countIf(d.cause_worker_crash) > 0 AS worker_crash,
    countIf(d.cause_broker_redelivery) > 0 AS broker_redelivery,
    countIf(d.cause_retry_after_failure) > 0 AS retry_after_failure,
    countIf(d.lock_overrun) > 0 AS lock_expired_while_running,
    countIf(d.lock_overlapped) > 0 AS overlapped,
    countIf(d.lock_split_brain) > 0 AS split_brain
FROM selected AS d
GROUP BY d.key
HAVING count(*) + sum(d.missing_attempts_before) > 1
ORDER BY first_us, key
