-- Every event once, with what the forensics read from it: the job's key (its idempotency
-- key, found on any event of the job_id, else the job_id), the execution it belongs to, and
-- the attrs the contract names (reason, settled_by, released, wait_ms, span.end_us).
-- ClickHouse spelling of queries/sql/event_facts.sql: FINAL collapses repeats of an
-- event_uid, JSONExtract* reads attrs, and an unmatched ASOF row carries '' not NULL.
-- A step that names neither worker nor attempt joins its job's latest deliver on any
-- worker (`loose`: found apart, so the join of every event stays one ASOF join).
WITH unique_events AS (
    SELECT *
    FROM events FINAL
),
job_keys AS (
    SELECT job_id, max(idempotency_key) AS job_key
    FROM unique_events
    WHERE job_id IS NOT NULL
    GROUP BY job_id
),
delivers AS (
    SELECT
        assumeNotNull(job_id) AS d_job,
        coalesce(worker_id, '') AS d_worker,
        coalesce(delivery_attempt, -1) AS d_attempt,
        ts AS d_ts,
        coalesce(execution_id, event_uid) AS d_execution
    FROM unique_events
    WHERE event = 'deliver' AND job_id IS NOT NULL
),
keyed AS (
    SELECT
        u.*,
        coalesce(nullIf(k.job_key, ''), u.job_id) AS key,
        coalesce(u.job_id, '') AS m_job,
        coalesce(u.worker_id, '') AS m_worker,
        coalesce(u.delivery_attempt, -1) AS m_attempt,
        -- include: loose_step
        AS loose
    FROM unique_events AS u
    LEFT JOIN job_keys AS k ON k.job_id = u.job_id
),
loose AS (
    SELECT l.event_uid AS l_uid, d.d_execution AS l_execution
    FROM (SELECT event_uid, assumeNotNull(job_id) AS l_job, ts
          FROM unique_events AS u
          WHERE
              -- include: loose_step
         ) AS l
    ASOF LEFT JOIN delivers AS d ON l.l_job = d.d_job AND l.ts >= d.d_ts
)
SELECT
    e.event_uid AS event_uid,
    e.ts AS ts,
    toUnixTimestamp64Micro(e.ts) AS ts_us,
    -- include: event_fact_columns
    CASE
        WHEN e.event IN ('outbox_write', 'enqueue', 'enqueue_deduped',
                         'worker_start', 'worker_stop') THEN NULL
        WHEN e.execution_id IS NOT NULL THEN e.execution_id
        WHEN e.event = 'deliver' THEN e.event_uid
        WHEN e.loose THEN nullIf(l.l_execution, '')
        ELSE nullIf(d.d_execution, '')
    END AS execution_uid,
    if(e.event IN ('nack', 'fail'),
        JSONExtract(ifNull(e.attrs, '{}'), 'reason', 'Nullable(String)'), NULL) AS reason,
    if(e.event IN ('nack', 'fail'),
        JSONExtract(ifNull(e.attrs, '{}'), 'settled_by', 'Nullable(String)'), NULL)
        AS settled_by,
    if(e.event = 'lock_release',
        lower(nullIf(trim(BOTH '"' FROM JSONExtractRaw(ifNull(e.attrs, '{}'), 'released')), '')),
        NULL) AS released,
    if(e.event = 'lock_contended',
        JSONExtract(ifNull(e.attrs, '{}'), 'wait_ms', 'Nullable(Float64)'), NULL) AS wait_ms,
    if(e.event = 'deliver',
        JSONExtract(ifNull(e.attrs, '{}'), 'span.end_us', 'Nullable(Int64)'), NULL)
        AS span_end_us
FROM keyed AS e
ASOF LEFT JOIN delivers AS d
    ON e.m_job = d.d_job
    AND e.m_worker = d.d_worker
    AND e.m_attempt = d.d_attempt
    AND e.ts >= d.d_ts
LEFT JOIN loose AS l ON l.l_uid = e.event_uid
