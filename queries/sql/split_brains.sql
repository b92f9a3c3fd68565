-- When two owners held unexpired locks on the same lock_key at once: one row per pair,
-- naming both executions, owners and keys, and the interval they overlapped.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
SELECT
    a.lock_key AS lock_key,
    a.lock_owner AS lock_owner,
    i.other_owner AS other_owner,
    a.key AS key,
    b.key AS other_key,
    a.job_id AS job_id,
    a.attempt AS delivery_attempt,
    a.worker_id AS worker_id,
    b.job_id AS other_job_id,
    b.worker_id AS other_worker_id,
    a.job_type AS job_type,
    i.from_us AS overlap_from_us,
    i.until_us AS overlap_until_us,
    (i.until_us - i.from_us) / 1000.0 AS overlap_ms
FROM derived_lock_incidents AS i
JOIN derived_executions AS a ON a.execution_uid = i.execution_uid
JOIN derived_executions AS b ON b.execution_uid = i.other_uid
WHERE i.rule = 'split_brain'
  AND a.lock_acquired_us <= b.lock_acquired_us
  AND (a.lock_acquired_us < b.lock_acquired_us OR a.execution_uid < b.execution_uid)
  AND (:job_type IS NULL OR a.job_type = :job_type OR b.job_type = :job_type)
  AND (:queue IS NULL OR a.queue = :queue OR b.queue = :queue)
  AND (:since_us IS NULL OR i.from_us >= :since_us)
  AND (:until_us IS NULL OR i.from_us < :until_us)
ORDER BY overlap_from_us, lock_key
