-- Each event's (key, job_id) pair under its job_id and under its key, with when it was
-- inserted: the rows of the id index (events_ids), which tells a derivation which pairs
-- have rows from before what it reads (queries/sql/clickhouse/derive_work_history.sql).
-- Grouped within each insert, before each pair is listed under its two values: a job's
-- several events of a day make one row, not one each, and the grouping sorts each pair
-- once, not once per value (what the index costs a write: python -m benchmarks
-- index_writes).
SELECT
    value,
    idempotency_key,
    job_id,
    day,
    first_ingested
FROM (
    SELECT
        ifNull(idempotency_key, '') AS idempotency_key,
        ifNull(job_id, '') AS job_id,
        toDate(ts) AS day,
        min(ingested_at) AS first_ingested
    FROM {db:Identifier}.{events:Identifier}
    GROUP BY idempotency_key, job_id, day
)
ARRAY JOIN arrayDistinct(arrayFilter(v -> v != '', [job_id, idempotency_key])) AS value
