-- How far behind each worker's clock runs, from causal pairs: a deliver cannot precede
-- its job's first enqueue, and an execution's events cannot precede its deliver. The
-- largest violation is the estimate; workers above the tolerance are flagged.
-- param tolerance_ms: Float64
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
WITH pairs AS (
    SELECT
        e.worker_id AS worker_id,
        greatest(coalesce(q.enqueued_us - e.start_us, 0), e.start_us - e.first_event_us, 0)
            AS violation_us,
        CASE WHEN q.enqueued_us IS NULL THEN 1 ELSE 2 END AS pair_count
    FROM derived_executions AS e
    LEFT JOIN derived_jobs AS q ON q.job_id = e.job_id
    WHERE e.worker_id IS NOT NULL
      AND (:job_type IS NULL OR e.job_type = :job_type)
      AND (:queue IS NULL OR e.queue = :queue)
      AND (:since_us IS NULL OR e.start_us >= :since_us)
      AND (:until_us IS NULL OR e.start_us < :until_us)
)
SELECT
    worker_id,
    sum(pair_count) AS causal_pairs,
    countIf(violation_us > 0) AS violations,
    max(violation_us) / 1000.0 AS behind_ms,
    max(violation_us) / 1000.0 > :tolerance_ms AS skewed
FROM pairs
GROUP BY worker_id
ORDER BY behind_ms DESC, worker_id
