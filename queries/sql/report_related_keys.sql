-- Keys that share something with one key's executions: the same job_id (a job whose key
-- changed), lock_key (who else held its lock) or resource_key (who else worked on the
-- same thing), each with what it shares and how many runs it had. For the incident
-- report of `key`; reads the derived executions.
-- param key: String
-- param limit: Int64
WITH mine AS (
    SELECT job_id, lock_key, resource_key FROM derived_executions WHERE key = :key
),
shared AS (
    SELECT e.key AS key, 'job_id' AS shares, e.job_id AS value, e.execution_uid AS run
    FROM derived_executions AS e
    WHERE e.job_id IN (SELECT job_id FROM mine WHERE job_id IS NOT NULL)
    UNION ALL
    SELECT e.key AS key, 'lock_key' AS shares, e.lock_key AS value, e.execution_uid AS run
    FROM derived_executions AS e
    WHERE e.lock_key IN (SELECT lock_key FROM mine WHERE lock_key IS NOT NULL)
    UNION ALL
    SELECT e.key AS key, 'resource_key' AS shares, e.resource_key AS value,
           e.execution_uid AS run
    FROM derived_executions AS e
    WHERE e.resource_key IN (SELECT resource_key FROM mine WHERE resource_key IS NOT NULL)
)
SELECT key, shares, value, count(DISTINCT run) AS runs
FROM shared
WHERE key <> :key
GROUP BY key, shares, value
ORDER BY shares, value, key
LIMIT :limit
