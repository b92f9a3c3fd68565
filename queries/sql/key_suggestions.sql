-- Keys whose idempotency key, job_id, resource key, lock owner or lock key starts with
-- :prefix, for the timeline's search box. `key` is what the timeline opens: the job's
-- idempotency key where it has one (lock and resource events often carry only the job_id),
-- otherwise its job_id. Newest first, so an on-call search finds the live incident.
-- param prefix: String
-- param limit: Int64
WITH hits AS (
    SELECT 'idempotency_key' AS kind, idempotency_key AS value, job_id, ts
    FROM events
    WHERE left(idempotency_key, length(:prefix)) = :prefix
    UNION ALL
    SELECT 'job_id' AS kind, job_id AS value, job_id, ts
    FROM events
    WHERE left(job_id, length(:prefix)) = :prefix
    UNION ALL
    SELECT 'resource_key' AS kind, resource_key AS value, job_id, ts
    FROM events
    WHERE left(resource_key, length(:prefix)) = :prefix
    UNION ALL
    SELECT 'lock_owner' AS kind, lock_owner AS value, job_id, ts
    FROM events
    WHERE left(lock_owner, length(:prefix)) = :prefix
    UNION ALL
    SELECT 'lock_key' AS kind, lock_key AS value, job_id, ts
    FROM events
    WHERE left(lock_key, length(:prefix)) = :prefix
),
job_keys AS (
    SELECT job_id, max(idempotency_key) AS idempotency_key
    FROM events
    WHERE job_id IN (SELECT job_id FROM hits WHERE job_id IS NOT NULL)
    GROUP BY job_id
)
SELECT
    h.kind AS kind,
    h.value AS value,
    coalesce(nullif(j.idempotency_key, ''), h.job_id) AS key,
    count(*) AS events,
    max(h.ts) AS last_ts
FROM hits AS h
LEFT JOIN job_keys AS j ON h.job_id = j.job_id
WHERE h.job_id IS NOT NULL
GROUP BY h.kind, h.value, coalesce(nullif(j.idempotency_key, ''), h.job_id)
ORDER BY last_ts DESC, kind, value
LIMIT :limit
