-- The id index filled from the rows `events` took since the earliest pending bulk insert
-- began: the rows of events_ids_rows.sql, read through the minmax index on ingested_at.
-- Run again over rows already in the index it changes nothing (the index keeps each
-- pair's first insert time).
INSERT INTO {own:Identifier}.events_ids
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
    FROM {own:Identifier}.events
    WHERE ingested_at >= (SELECT min(at) FROM {own:Identifier}.otel_ids_pending)
    GROUP BY idempotency_key, job_id, day
)
ARRAY JOIN arrayDistinct(arrayFilter(v -> v != '', [job_id, idempotency_key])) AS value
SETTINGS max_partitions_per_insert_block = 0
