-- Each event's (key, job_id) pair under its job_id and under its key, with when it was
-- inserted: the rows of the id index (events_ids), which tells a derivation which pairs
-- have rows from before what it reads (queries/sql/clickhouse/derive_work_history.sql).
-- Grouped within each insert: a job's several events of a day make one row, not one each
-- (what the index costs a write: python -m benchmarks index_writes).
SELECT
    value,
    idempotency_key,
    job_id,
    day,
    min(inserted) AS first_ingested
FROM (
    SELECT
        value,
        ifNull(idempotency_key, '') AS idempotency_key,
        ifNull(job_id, '') AS job_id,
        toDate(ts) AS day,
        ingested_at AS inserted
    FROM {db:Identifier}.{events:Identifier}
    ARRAY JOIN arrayDistinct(arrayFilter(v -> v != '',
        [ifNull(job_id, ''), ifNull(idempotency_key, '')])) AS value
)
GROUP BY value, idempotency_key, job_id, day
