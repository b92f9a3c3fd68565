-- Every event once, with what the forensics read from it: the job's key (its idempotency
-- key, found on any event of the job_id, else the job_id), the execution it belongs to, and
-- the attrs the contract names (reason, settled_by, released, wait_ms, span.end_us).
-- Reads `unique_events` (events with repeats of an event_uid collapsed; see
-- queries/derived.py, which collapses only where repeats exist).
-- An execution starts at a `deliver`; a later worker event of the same job_id on the same
-- worker (and delivery_attempt, where there is one) belongs to the latest such deliver at or
-- before it, so a redelivery with no attempt number still starts a new execution. Spans
-- name their execution themselves (execution_id). A step that names neither worker nor
-- attempt (an effect the app logs apart, keyed by the task id alone, beside a source that
-- saw the deliver) belongs to the job's latest deliver at or before it, on any worker.
-- Nearly every (job_id, worker, attempt) has one deliver, which a hash join finds; only
-- the groups with several (a transport that keeps no attempt count) need the ASOF join.
WITH job_keys AS (
    SELECT job_id, max(idempotency_key) AS job_key
    FROM unique_events
    WHERE job_id IS NOT NULL
    GROUP BY job_id
),
delivers AS (
    SELECT
        job_id AS d_job,
        coalesce(worker_id, '') AS d_worker,
        coalesce(delivery_attempt, -1) AS d_attempt,
        ts AS d_ts,
        coalesce(execution_id, event_uid) AS d_execution
    FROM unique_events
    WHERE event = 'deliver' AND job_id IS NOT NULL
),
deliver_groups AS (
    SELECT
        d_job,
        d_worker,
        d_attempt,
        count(*) AS delivers,
        min(d_ts) AS first_ts,
        min(d_execution) AS only_execution
    FROM delivers
    GROUP BY d_job, d_worker, d_attempt
),
keyed AS (
    SELECT
        u.*,
        coalesce(k.job_key, u.job_id) AS key,
        coalesce(u.worker_id, '') AS m_worker,
        coalesce(u.delivery_attempt, -1) AS m_attempt,
        -- include: loose_step
        AS loose
    FROM unique_events AS u
    LEFT JOIN job_keys AS k ON k.job_id = u.job_id
),
single AS (
    SELECT
        e.*,
        CASE WHEN e.ts >= g.first_ts THEN g.only_execution END AS d_execution
    FROM keyed AS e
    LEFT JOIN deliver_groups AS g
        ON e.job_id = g.d_job AND e.m_worker = g.d_worker AND e.m_attempt = g.d_attempt
    WHERE coalesce(g.delivers, 1) = 1 AND NOT e.loose
),
several AS (
    SELECT e.*, d.d_execution AS d_execution
    FROM (
        SELECT e.*
        FROM keyed AS e
        SEMI JOIN (SELECT * FROM deliver_groups WHERE delivers > 1) AS g
            ON e.job_id = g.d_job AND e.m_worker = g.d_worker AND e.m_attempt = g.d_attempt
        WHERE NOT e.loose
    ) AS e
    ASOF LEFT JOIN delivers AS d
        ON e.job_id = d.d_job
        AND e.m_worker = d.d_worker
        AND e.m_attempt = d.d_attempt
        AND e.ts >= d.d_ts
),
loose AS (
    SELECT e.*, d.d_execution AS d_execution
    FROM (SELECT * FROM keyed WHERE loose) AS e
    ASOF LEFT JOIN delivers AS d ON e.job_id = d.d_job AND e.ts >= d.d_ts
),
assigned AS (
    SELECT * FROM single
    UNION ALL
    SELECT * FROM several
    UNION ALL
    SELECT * FROM loose
)
SELECT
    e.event_uid AS event_uid,
    e.ts AS ts,
    epoch_us(e.ts) AS ts_us,
    -- include: event_fact_columns
    CASE
        WHEN e.event IN ('outbox_write', 'enqueue', 'enqueue_deduped',
                         'worker_start', 'worker_stop') THEN NULL
        WHEN e.execution_id IS NOT NULL THEN e.execution_id
        WHEN e.event = 'deliver' THEN e.event_uid
        ELSE e.d_execution
    END AS execution_uid,
    CASE WHEN e.event IN ('nack', 'fail')
        THEN json_extract_string(e.attrs, '$.reason') END AS reason,
    CASE WHEN e.event IN ('nack', 'fail')
        THEN json_extract_string(e.attrs, '$.settled_by') END AS settled_by,
    CASE WHEN e.event = 'lock_release'
        THEN lower(json_extract_string(e.attrs, '$.released')) END AS released,
    CASE WHEN e.event = 'lock_contended'
        THEN TRY_CAST(json_extract_string(e.attrs, '$.wait_ms') AS DOUBLE) END AS wait_ms,
    CASE WHEN e.event = 'deliver'
        THEN TRY_CAST(json_extract_string(e.attrs, '$."span.end_us"') AS BIGINT) END
        AS span_end_us
FROM assigned AS e
