-- Every execution (one run of a job's body) with its timing, outcome and lock validity.
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
SELECT *
FROM derived_executions
WHERE (:job_type IS NULL OR job_type = :job_type)
      AND (:queue IS NULL OR queue = :queue)
      AND (:since_us IS NULL OR start_us >= :since_us)
      AND (:until_us IS NULL OR start_us < :until_us)
ORDER BY start_us, execution_uid
