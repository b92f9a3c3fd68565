-- The exporter's spans and log records as dupescope's `events` (store/schema.py), read in
-- place: otel_records holds one record per lifecycle event with its attributes as a
-- Map(String, String) (otel_span_records.sql, otel_log_records.sql). This picks the
-- contract's fields out of it as collectors/normalise.py does: the first spelling present
-- wins (the canonical name, its `job.` form, then the contract's aliases), integers may
-- arrive as text ('2'), the rest is kept in `attrs`. A record the normaliser would refuse
-- (no event kind, no job_id where one is needed, an attempt that is no integer >= 1) is left
-- out, as the collector leaves it out of a batch.
WITH
    ['outbox_write', 'enqueue', 'enqueue_deduped', 'deliver', 'lock_acquire',
     'lock_contended', 'lock_renew', 'lock_release', 'lock_expired', 'idempotency_hit',
     'side_effect', 'occ_conflict', 'commit', 'ack', 'nack', 'fail', 'worker_start',
     'worker_stop'] AS kinds,
    map('create', 'enqueue', 'send', 'enqueue', 'publish', 'enqueue', 'receive', 'deliver',
        'process', 'deliver', 'deliver', 'deliver', 'settle', 'ack') AS operations,
    ['job_id', 'job.job_id', 'messaging.message.id', 'messaging.message_id'] AS job_id_keys,
    ['job_type', 'job.job_type', 'celery.task_name'] AS job_type_keys,
    ['idempotency_key', 'job.idempotency_key'] AS idempotency_key_keys,
    ['resource_key', 'job.resource_key'] AS resource_key_keys,
    ['queue', 'job.queue', 'messaging.destination.name', 'messaging.destination']
        AS queue_keys,
    ['worker_id', 'job.worker_id', 'resource.worker_id', 'service.instance.id']
        AS worker_id_keys,
    ['lock_key', 'job.lock_key'] AS lock_key_keys,
    ['lock_owner', 'job.lock_owner'] AS lock_owner_keys,
    ['service_version', 'job.service_version', 'service.version'] AS service_version_keys,
    ['trace_id', 'job.trace_id'] AS trace_id_keys,
    ['span_id', 'job.span_id'] AS span_id_keys,
    ['delivery_attempt', 'job.delivery_attempt',
     'messaging.gcp_pubsub.message.delivery_attempt',
     'messaging.servicebus.message.delivery_count', 'aws.sqs.approximate_receive_count',
     'ApproximateReceiveCount', 'celery.delivery_attempt']
        AS delivery_attempt_keys,
    ['lock_ttl_ms', 'job.lock_ttl_ms'] AS lock_ttl_ms_keys,
    ['visibility_timeout_ms', 'job.visibility_timeout_ms'] AS visibility_timeout_ms_keys,
    arrayConcat(['ts', 'job.ts', 'timestamp', 'time', '@timestamp', 'event', 'job.event'],
        job_id_keys, job_type_keys, idempotency_key_keys, resource_key_keys, queue_keys,
        worker_id_keys, lock_key_keys, lock_owner_keys, service_version_keys, trace_id_keys,
        span_id_keys, delivery_attempt_keys, lock_ttl_ms_keys, visibility_timeout_ms_keys)
        AS spellings,
    -- The first spelling present, else NULL (a Map answers '' for a missing key). Written
    -- out for up to seven spellings (a missing one is ''), not as arrayFirst(k -> ...): a
    -- lambda copies the Map it reads once per spelling, which made this the slowest step.
    (m, keys) -> multiIf(
        mapContains(m, keys[1]), m[keys[1]],
        mapContains(m, keys[2]), m[keys[2]],
        mapContains(m, keys[3]), m[keys[3]],
        mapContains(m, keys[4]), m[keys[4]],
        mapContains(m, keys[5]), m[keys[5]],
        mapContains(m, keys[6]), m[keys[6]],
        mapContains(m, keys[7]), m[keys[7]],
        NULL) AS spelled,
    v -> match(v, '^\\s*-?[0-9]{1,18}\\s*$') AS integral,
    picked AS (
        SELECT
            record_uid,
            record_ts,
            record_source,
            record_attrs,
            multiIf(
                mapContains(record_attrs, 'event'), record_attrs['event'],
                mapContains(record_attrs, 'job.event'), record_attrs['job.event'],
                mapContains(record_attrs, 'messaging.operation.type'),
                operations[record_attrs['messaging.operation.type']],
                mapContains(record_attrs, 'messaging.operation'),
                operations[record_attrs['messaging.operation']],
                '') AS kind,
            spelled(record_attrs, job_id_keys) AS p_job_id,
            spelled(record_attrs, delivery_attempt_keys) AS attempt_text,
            record_attrs['celery.retries'] AS retries_text,
            spelled(record_attrs, lock_ttl_ms_keys) AS ttl_text,
            spelled(record_attrs, visibility_timeout_ms_keys) AS visibility_text
        FROM otel_records
    )
SELECT
    record_uid AS event_uid,
    record_ts AS ts,
    kind AS event,
    p_job_id AS job_id,
    spelled(record_attrs, job_type_keys) AS job_type,
    spelled(record_attrs, idempotency_key_keys) AS idempotency_key,
    spelled(record_attrs, resource_key_keys) AS resource_key,
    spelled(record_attrs, queue_keys) AS queue,
    toInt32(multiIf(
        attempt_text IS NOT NULL, toInt64OrNull(trimBoth(assumeNotNull(attempt_text))),
        mapContains(record_attrs, 'celery.retries'), toInt64OrNull(trimBoth(retries_text)) + 1,
        NULL)) AS delivery_attempt,
    spelled(record_attrs, worker_id_keys) AS worker_id,
    spelled(record_attrs, lock_key_keys) AS lock_key,
    spelled(record_attrs, lock_owner_keys) AS lock_owner,
    toInt64OrNull(trimBoth(ttl_text)) AS lock_ttl_ms,
    toInt64OrNull(trimBoth(visibility_text)) AS visibility_timeout_ms,
    spelled(record_attrs, service_version_keys) AS service_version,
    spelled(record_attrs, trace_id_keys) AS trace_id,
    spelled(record_attrs, span_id_keys) AS span_id,
    if(mapContains(record_attrs, 'execution_id'), record_attrs['execution_id'], NULL)
        AS execution_id,
    record_source AS source,
    if(empty(mapFilter((k, v) -> k NOT IN spellings, record_attrs)), NULL,
        toJSONString(mapFilter((k, v) -> k NOT IN spellings, record_attrs))) AS attrs
FROM picked
WHERE kind IN kinds
    AND (kind IN ('enqueue_deduped', 'worker_start', 'worker_stop') OR p_job_id != '')
    AND (attempt_text IS NULL OR integral(attempt_text))
    AND (attempt_text IS NOT NULL OR NOT mapContains(record_attrs, 'celery.retries')
        OR integral(retries_text))
    AND coalesce(multiIf(
        attempt_text IS NOT NULL, toInt64OrNull(trimBoth(assumeNotNull(attempt_text))),
        mapContains(record_attrs, 'celery.retries'), toInt64OrNull(trimBoth(retries_text)) + 1,
        NULL) BETWEEN 1 AND 2147483647, 1)
    AND (ttl_text IS NULL OR integral(ttl_text))
    AND (visibility_text IS NULL OR integral(visibility_text))
