-- Per-execution durations with the lock TTL and visibility timeout each run was given:
-- the raw material of duration histograms.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
SELECT job_type, key, job_id, attempt AS delivery_attempt, worker_id, start_us,
       duration_ms, lock_ttl_ms, lock_renewals, visibility_timeout_ms, terminal
FROM derived_executions
WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
ORDER BY job_type, start_us
