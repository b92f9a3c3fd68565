-- How long business changes wait in the outbox: per job type, the lag from a job's
-- first outbox_write to its first enqueue.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
SELECT
    job_type,
    count(*) AS jobs,
    avg((enqueued_us - written_us) / 1000.0) AS outbox_lag_ms_avg,
    max((enqueued_us - written_us) / 1000.0) AS outbox_lag_ms_max,
    countIf(enqueued_us IS NULL) AS written_not_enqueued
FROM derived_jobs
WHERE written_us IS NOT NULL
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:queue IS NULL OR queue = :queue)
  AND (:since_us IS NULL OR written_us >= :since_us)
  AND (:until_us IS NULL OR written_us < :until_us)
GROUP BY job_type
ORDER BY job_type
