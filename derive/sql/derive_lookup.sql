-- Every value the timeline's search box matches by prefix (idempotency key, job_id,
-- resource key, lock owner, lock key) with the key its timeline opens, how many events
-- carry it and the newest: the search reads a narrow range of this table, sorted by value,
-- instead of five scans of `events`. Counts are of distinct events (`unique_events`), so
-- a resent batch or a compaction, which drops repeats, changes none. `key` is the job's idempotency key where it has one
-- (lock and resource events often carry only the job_id), otherwise its job_id.
WITH job_keys AS (
    SELECT job_id, max(idempotency_key) AS idempotency_key
    FROM unique_events
    WHERE job_id IS NOT NULL
    GROUP BY job_id
),
hits AS (
    SELECT 'idempotency_key' AS kind, idempotency_key AS value, job_id, ts
    FROM unique_events
    WHERE idempotency_key IS NOT NULL AND job_id IS NOT NULL
    UNION ALL
    SELECT 'job_id' AS kind, job_id AS value, job_id, ts
    FROM unique_events
    WHERE job_id IS NOT NULL
    UNION ALL
    SELECT 'resource_key' AS kind, resource_key AS value, job_id, ts
    FROM unique_events
    WHERE resource_key IS NOT NULL AND job_id IS NOT NULL
    UNION ALL
    SELECT 'lock_owner' AS kind, lock_owner AS value, job_id, ts
    FROM unique_events
    WHERE lock_owner IS NOT NULL AND job_id IS NOT NULL
    UNION ALL
    SELECT 'lock_key' AS kind, lock_key AS value, job_id, ts
    FROM unique_events
    WHERE lock_key IS NOT NULL AND job_id IS NOT NULL
),
per_job AS (
    SELECT kind, value, job_id, count(*) AS events, max(ts) AS last_ts
    FROM hits
    GROUP BY kind, value, job_id
)
SELECT
    p.kind AS kind,
    p.value AS value,
    coalesce(nullif(j.idempotency_key, ''), p.job_id) AS key,
    CAST(sum(p.events) AS BIGINT) AS events,
    max(p.last_ts) AS last_ts
FROM per_job AS p
LEFT JOIN job_keys AS j ON p.job_id = j.job_id
GROUP BY p.kind, p.value, coalesce(nullif(j.idempotency_key, ''), p.job_id)
ORDER BY value, kind, key
