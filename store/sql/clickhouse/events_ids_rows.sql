-- Each event's (key, job_id) pair under its job_id and under its key, with when it was
-- inserted: the rows of the id index (events_ids), which tells a derivation which pairs
-- have rows from before what it reads (queries/sql/clickhouse/derive_work_history.sql).
SELECT
    value,
    ifNull(idempotency_key, '') AS idempotency_key,
    ifNull(job_id, '') AS job_id,
    toDate(ts) AS day,
    ingested_at AS first_ingested
FROM {db:Identifier}.{events:Identifier}
ARRAY JOIN arrayDistinct(arrayFilter(v -> v != '',
    [ifNull(job_id, ''), ifNull(idempotency_key, '')])) AS value
