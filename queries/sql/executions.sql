-- Every execution (one run of a job's body) with its timing, outcome and lock validity.
SELECT *
FROM derived_executions
WHERE
    -- include: execution_filters
ORDER BY start_us, execution_uid
