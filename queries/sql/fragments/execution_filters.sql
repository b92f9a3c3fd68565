-- The filters a caller may set on executions (each NULL when unset): job type, queue, and
-- a window [since_us, until_us) on when the run started. Rows need job_type, queue and
-- start_us. Taken into a WHERE by `-- include: execution_filters` (queries/loader.py).
-- param job_type: String
-- param queue: String
-- param since_us: Int64
-- param until_us: Int64
(:job_type IS NULL OR job_type = :job_type)
AND (:queue IS NULL OR queue = :queue)
AND (:since_us IS NULL OR start_us >= :since_us)
AND (:until_us IS NULL OR start_us < :until_us)
