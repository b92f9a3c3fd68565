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
    min(inserted) AS first_ingested
FROM (
    SELECT
        value,
        ifNull(idempotency_key, '') AS idempotency_key,
        ifNull(job_id, '') AS job_id,
        toDate(ts) AS day,
        ingested_at AS inserted
    FROM {own:Identifier}.events
    ARRAY JOIN arrayDistinct(arrayFilter(v -> v != '',
        [ifNull(job_id, ''), ifNull(idempotency_key, '')])) AS value
    WHERE ingested_at >= (SELECT min(at) FROM {own:Identifier}.otel_ids_pending)
)
GROUP BY value, idempotency_key, job_id, day
SETTINGS max_partitions_per_insert_block = 0
