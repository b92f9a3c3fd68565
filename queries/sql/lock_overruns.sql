-- Which executions' locks expired while they were still running (validity = last
-- lock_acquire/lock_renew + lock_ttl_ms, before the execution's end), by how much, and
-- which other owner acquired the lock inside that gap (overlapped), if any.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
SELECT
    e.key AS key,
    e.job_id AS job_id,
    e.attempt AS delivery_attempt,
    e.worker_id AS worker_id,
    e.job_type AS job_type,
    e.lock_key AS lock_key,
    e.lock_owner AS lock_owner,
    i.from_us AS expired_at_us,
    e.end_us AS execution_end_us,
    (e.end_us - i.from_us) / 1000.0 AS overrun_ms,
    i.other_owner AS overlapped_by,
    e.lock_expired_event_us AS lock_expired_event_us,
    e.execution_uid AS execution_uid
FROM derived_executions AS e
-- The few incidents on the right: ClickHouse builds its hash table from that side.
JOIN (SELECT * FROM derived_lock_incidents WHERE rule = 'lock_expired_while_running') AS i
    ON i.execution_uid = e.execution_uid
WHERE e.lock_expired_while_running
  AND (:job_type IS NULL OR e.job_type = :job_type)
  AND (:queue IS NULL OR e.queue = :queue)
  AND (:since_us IS NULL OR e.start_us >= :since_us)
  AND (:until_us IS NULL OR e.start_us < :until_us)
ORDER BY expired_at_us, key
