-- Per job type, the checklist's execution-level ratios: lock contention and time spent
-- waiting (wait_ms), redeliveries per message, idempotency hits against executions that
-- ran the effect, and optimistic-concurrency conflicts.
SELECT
    job_type,
    count(*) AS executions,
    count(DISTINCT job_id) AS messages,
    count(*) + sum(missing_attempts_before) - count(DISTINCT job_id) AS redeliveries,
    (count(*) + sum(missing_attempts_before)) / count(DISTINCT job_id) AS deliveries_per_message,
    countIf(lock_contended) AS lock_contended,
    countIf(lock_contended) / count(*) AS lock_contention_ratio,
    sum(lock_wait_ms) AS lock_wait_ms_total,
    sum(lock_wait_ms) / greatest(countIf(lock_contended), 1) AS lock_wait_ms_avg,
    countIf(idempotency_hit) AS idempotency_hits,
    countIf(had_side_effect) AS new_executions,
    countIf(idempotency_hit) / greatest(countIf(idempotency_hit) + countIf(had_side_effect), 1)
        AS idempotency_hit_ratio,
    countIf(occ_conflict) AS occ_conflicts,
    countIf(occ_conflict) / count(*) AS occ_conflict_ratio
FROM derived_executions
WHERE
    -- include: execution_filters
GROUP BY job_type
ORDER BY job_type
