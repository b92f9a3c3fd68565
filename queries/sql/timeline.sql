-- The timeline of one key: every event of an idempotency key (or of a job_id), in time
-- order, each labelled with the execution it belongs to.
-- An execution starts at a `deliver`; a later event of the same job_id on the same worker
-- (and the same delivery_attempt, where there is one) belongs to the latest such deliver
-- at or before it. Spans name their execution themselves (execution_id). A step that
-- names neither worker nor attempt (an effect logged apart, keyed by the task id alone)
-- belongs to its job's latest deliver at or before it, on any worker.
-- param key: String
-- Two steps, each a plain filter the store can prune by its sort order: the job_ids of the
-- key first, then the key's own rows plus the other rows of those jobs.
WITH key_jobs AS (
    SELECT job_id FROM events WHERE idempotency_key = :key AND job_id IS NOT NULL
    UNION ALL
    SELECT :key AS job_id
),
matched AS (
    SELECT *
    FROM (
        SELECT * FROM events WHERE idempotency_key = :key
        UNION ALL
        SELECT *
        FROM events
        WHERE job_id IN (SELECT job_id FROM key_jobs)
          AND (idempotency_key IS NULL OR idempotency_key <> :key)
    ) AS found
    QUALIFY row_number() OVER (PARTITION BY event_uid ORDER BY ts) = 1
),
delivers AS (
    SELECT
        coalesce(job_id, '') AS d_job,
        coalesce(worker_id, '') AS d_worker,
        coalesce(delivery_attempt, -1) AS d_attempt,
        ts AS d_ts,
        coalesce(execution_id, event_uid) AS d_execution
    FROM matched
    WHERE event = 'deliver'
),
placed AS (
    SELECT
        u.*,
        coalesce(u.job_id, '') AS m_job,
        coalesce(u.worker_id, '') AS m_worker,
        coalesce(u.delivery_attempt, -1) AS m_attempt,
        -- include: loose_step
        AS loose
    FROM matched AS u
),
assigned AS (
    SELECT p.*, d.d_execution AS d_execution
    FROM (SELECT * FROM placed WHERE NOT loose) AS p
    ASOF LEFT JOIN delivers AS d
        ON p.m_job = d.d_job
        AND p.m_worker = d.d_worker
        AND p.m_attempt = d.d_attempt
        AND p.ts >= d.d_ts
    UNION ALL
    SELECT p.*, d.d_execution AS d_execution
    FROM (SELECT * FROM placed WHERE loose) AS p
    ASOF LEFT JOIN delivers AS d ON p.m_job = d.d_job AND p.ts >= d.d_ts
)
SELECT
    p.ts AS ts,
    p.event AS event,
    CASE
        WHEN p.event IN ('outbox_write', 'enqueue', 'enqueue_deduped') THEN NULL
        WHEN p.execution_id IS NOT NULL THEN p.execution_id
        WHEN p.event = 'deliver' THEN p.event_uid
        ELSE p.d_execution
    END AS execution_uid,
    p.job_id AS job_id,
    p.delivery_attempt AS delivery_attempt,
    p.worker_id AS worker_id,
    p.job_type AS job_type,
    p.idempotency_key AS idempotency_key,
    p.resource_key AS resource_key,
    p.queue AS queue,
    p.lock_key AS lock_key,
    p.lock_owner AS lock_owner,
    p.lock_ttl_ms AS lock_ttl_ms,
    p.visibility_timeout_ms AS visibility_timeout_ms,
    p.service_version AS service_version,
    p.trace_id AS trace_id,
    p.span_id AS span_id,
    p.attrs AS attrs,
    p.event_uid AS event_uid
FROM assigned AS p
ORDER BY ts, event_uid
