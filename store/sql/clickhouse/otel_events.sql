-- The exporter's spans and log records as dupescope's `events` (store/schema.py), read in
-- place: otel_records holds one record per lifecycle event with the contract's fields
-- picked (`fields`, by field number: otel_span_records.sql, otel_log_records.sql) and the
-- attributes that spell none (`rest`). This checks and shapes them as
-- collectors/normalise.py does: integers may arrive as text ('2'), a Celery retry count
-- is attempt - 1, `rest` is kept as `attrs`. A record the normaliser would refuse (no
-- event kind, no job_id where one is needed, an attempt that is no integer >= 1) is left
-- out, as the collector leaves it out of a batch.
WITH
    -- include: otel_spellings
    -- A Map(String, String) as a JSON object, from each key's and value's JSON string:
    -- what toJSONString gives the Map, in two thirds of the time on records that carry a
    -- real SDK's resource (fifteen keys each), where serialising whole Maps was two fifths
    -- of the mapping.
    m -> concat('{', arrayStringConcat(arrayMap((k, v) -> concat(toJSONString(k), ':',
        toJSONString(v)), mapKeys(m), mapValues(m)), ','), '}') AS json_of,
    checked AS (
        SELECT
            *,
            spelled(fields, 'job_id') AS p_job_id,
            spelled(fields, 'delivery_attempt') AS attempt_text,
            if(mapContains(rest, 'celery.retries'), rest['celery.retries'], NULL)
                AS retries_text,
            spelled(fields, 'lock_ttl_ms') AS ttl_text,
            spelled(fields, 'visibility_timeout_ms') AS visibility_text,
            multiIf(
                attempt_text IS NOT NULL, toInt64OrNull(trimBoth(assumeNotNull(attempt_text))),
                retries_text IS NOT NULL,
                toInt64OrNull(trimBoth(assumeNotNull(retries_text))) + 1,
                NULL) AS attempt
        FROM otel_records
    )
SELECT
    record_uid AS event_uid,
    record_ts AS ts,
    kind AS event,
    p_job_id AS job_id,
    spelled(fields, 'job_type') AS job_type,
    spelled(fields, 'idempotency_key') AS idempotency_key,
    spelled(fields, 'resource_key') AS resource_key,
    spelled(fields, 'queue') AS queue,
    toInt32(attempt) AS delivery_attempt,
    spelled(fields, 'worker_id') AS worker_id,
    spelled(fields, 'lock_key') AS lock_key,
    spelled(fields, 'lock_owner') AS lock_owner,
    toInt64OrNull(trimBoth(ttl_text)) AS lock_ttl_ms,
    toInt64OrNull(trimBoth(visibility_text)) AS visibility_timeout_ms,
    spelled(fields, 'service_version') AS service_version,
    spelled(fields, 'trace_id') AS trace_id,
    spelled(fields, 'span_id') AS span_id,
    if(mapContains(rest, 'execution_id'), rest['execution_id'], NULL) AS execution_id,
    record_source AS source,
    if(empty(rest), NULL, json_of(rest)) AS attrs
FROM checked
WHERE kind IN kinds
    AND (kind IN ('enqueue_deduped', 'worker_start', 'worker_stop') OR p_job_id != '')
    AND (attempt_text IS NULL OR integral(attempt_text))
    AND (attempt_text IS NOT NULL OR retries_text IS NULL
        OR integral(assumeNotNull(retries_text)))
    AND coalesce(attempt BETWEEN 1 AND 2147483647, 1)
    AND (ttl_text IS NULL OR integral(ttl_text))
    AND (visibility_text IS NULL OR integral(visibility_text))
