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
    -- The canonical fields in the order `fields` below keeps them, with their spellings
    -- (at most seven each), and each spelling's code: its field's number times 8 plus its
    -- rank among the field's spellings.
    ['job_id', 'job_type', 'idempotency_key', 'resource_key', 'queue', 'worker_id',
     'lock_key', 'lock_owner', 'service_version', 'trace_id', 'span_id', 'delivery_attempt',
     'lock_ttl_ms', 'visibility_timeout_ms'] AS field_names,
    [job_id_keys, job_type_keys, idempotency_key_keys, resource_key_keys, queue_keys,
     worker_id_keys, lock_key_keys, lock_owner_keys, service_version_keys, trace_id_keys,
     span_id_keys, delivery_attempt_keys, lock_ttl_ms_keys, visibility_timeout_ms_keys]
        AS field_spellings,
    arrayFlatten(field_spellings) AS spelling_keys,
    arrayFlatten(arrayMap((keys, n) -> arrayMap(i -> toUInt8(n * 8 + i), arrayEnumerate(keys)),
        field_spellings, range(1, length(field_spellings) + 1))) AS spelling_codes,
    -- A field's value in `fields` (a record's first spelling present of each field), else
    -- NULL (a Map answers '' for a missing key).
    (m, name) -> if(mapContains(m, toUInt8(indexOf(field_names, name))),
        m[toUInt8(indexOf(field_names, name))], NULL) AS spelled,
    v -> match(v, '^\\s*-?[0-9]{1,18}\\s*$') AS integral,
    -- One pass over a record's keys finds every field's first spelling present: each
    -- key's code by a hash lookup (0: no spelling), the (code, value) pairs sorted, and the
    -- first pair of each field kept, by field number (a lookup by name of every spelling of
    -- every field took three times as long).
    coded AS (
        SELECT
            record_uid,
            record_ts,
            record_source,
            record_attrs,
            arraySort(arrayFilter(pair -> pair.1 > 0, arrayZip(
                arrayMap(k -> transform(k, spelling_keys, spelling_codes, toUInt8(0)),
                    mapKeys(record_attrs)),
                mapValues(record_attrs)))) AS pairs,
            arrayMap(pair -> intDiv(pair.1, 8), pairs) AS pair_fields,
            -- Non-zero where a pair starts its field: the first pair, or a field number
            -- greater than the one before (field numbers start at 1; none: no pairs).
            arrayPopFront(arrayDifference(arrayPushFront(pair_fields, 0))) AS field_starts,
            mapFromArrays(arrayFilter((n, start) -> start != 0, pair_fields, field_starts),
                arrayFilter((pair, start) -> start != 0, pairs, field_starts).2) AS fields
        FROM otel_records
    ),
    picked AS (
        SELECT
            record_uid,
            record_ts,
            record_source,
            record_attrs,
            fields,
            multiIf(
                mapContains(record_attrs, 'event'), record_attrs['event'],
                mapContains(record_attrs, 'job.event'), record_attrs['job.event'],
                mapContains(record_attrs, 'messaging.operation.type'),
                operations[record_attrs['messaging.operation.type']],
                mapContains(record_attrs, 'messaging.operation'),
                operations[record_attrs['messaging.operation']],
                '') AS kind,
            spelled(fields, 'job_id') AS p_job_id,
            spelled(fields, 'delivery_attempt') AS attempt_text,
            record_attrs['celery.retries'] AS retries_text,
            spelled(fields, 'lock_ttl_ms') AS ttl_text,
            spelled(fields, 'visibility_timeout_ms') AS visibility_text
        FROM coded
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
    toInt32(multiIf(
        attempt_text IS NOT NULL, toInt64OrNull(trimBoth(assumeNotNull(attempt_text))),
        mapContains(record_attrs, 'celery.retries'), toInt64OrNull(trimBoth(retries_text)) + 1,
        NULL)) AS delivery_attempt,
    spelled(fields, 'worker_id') AS worker_id,
    spelled(fields, 'lock_key') AS lock_key,
    spelled(fields, 'lock_owner') AS lock_owner,
    toInt64OrNull(trimBoth(ttl_text)) AS lock_ttl_ms,
    toInt64OrNull(trimBoth(visibility_text)) AS visibility_timeout_ms,
    spelled(fields, 'service_version') AS service_version,
    spelled(fields, 'trace_id') AS trace_id,
    spelled(fields, 'span_id') AS span_id,
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
