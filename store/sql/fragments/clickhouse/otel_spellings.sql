-- The contract's event kinds and fields with every spelling the mapping of the exporter's
-- tables accepts (as collectors/normalise.py does: the canonical name, its `job.` form,
-- then the contract's aliases; the first spelling present wins), and the one-pass picking
-- of fields from a record's keys. WITH items, taken in by otel_span_records.sql,
-- otel_log_records.sql and otel_events.sql after their WITH.
['outbox_write', 'enqueue', 'enqueue_deduped', 'deliver', 'lock_acquire',
 'lock_contended', 'lock_renew', 'lock_release', 'lock_expired', 'idempotency_hit',
 'side_effect', 'occ_conflict', 'commit', 'ack', 'nack', 'fail', 'worker_start',
 'worker_stop'] AS kinds,
map('create', 'enqueue', 'send', 'enqueue', 'publish', 'enqueue', 'receive', 'deliver',
    'process', 'deliver', 'deliver', 'deliver', 'settle', 'ack') AS operations,
['ts', 'job.ts', 'timestamp', 'time', '@timestamp'] AS ts_keys,
-- The fields, each at its number (1-14), with its spellings in order (at most seven).
['job_id', 'job_type', 'idempotency_key', 'resource_key', 'queue', 'worker_id',
 'lock_key', 'lock_owner', 'service_version', 'trace_id', 'span_id', 'delivery_attempt',
 'lock_ttl_ms', 'visibility_timeout_ms'] AS field_names,
[['job_id', 'job.job_id', 'messaging.message.id', 'messaging.message_id'],
 ['job_type', 'job.job_type', 'celery.task_name'],
 ['idempotency_key', 'job.idempotency_key'],
 ['resource_key', 'job.resource_key'],
 ['queue', 'job.queue', 'messaging.destination.name', 'messaging.destination'],
 ['worker_id', 'job.worker_id', 'resource.worker_id', 'service.instance.id'],
 ['lock_key', 'job.lock_key'],
 ['lock_owner', 'job.lock_owner'],
 ['service_version', 'job.service_version', 'service.version'],
 ['trace_id', 'job.trace_id'],
 ['span_id', 'job.span_id'],
 ['delivery_attempt', 'job.delivery_attempt', 'messaging.gcp_pubsub.message.delivery_attempt',
  'messaging.servicebus.message.delivery_count', 'aws.sqs.approximate_receive_count',
  'ApproximateReceiveCount', 'celery.delivery_attempt'],
 ['lock_ttl_ms', 'job.lock_ttl_ms'],
 ['visibility_timeout_ms', 'job.visibility_timeout_ms']] AS field_spellings,
arrayFlatten(field_spellings) AS spelling_keys,
-- Keys that are no attribute of the event (`attrs` keeps every other key).
arrayConcat(ts_keys, ['event', 'job.event'], spelling_keys) AS spellings,
-- A spelling's code: (its field's number * 8 + its rank among the field's spellings) * 4,
-- plus where the key came from (`origin`: 0 wins over 1 over 2 for the same spelling), so
-- that sorting (code, value) pairs puts each field's winning pair first.
arrayFlatten(arrayMap((keys, n) -> arrayMap(i -> toUInt16((n * 8 + i) * 4),
        arrayEnumerate(keys)),
    field_spellings, range(1, length(field_spellings) + 1))) AS spelling_codes,
pair -> toUInt8(intDiv(pair.1, 32)) AS field_of,
-- A record's (code, value) pairs of the keys that spell a field, unsorted: one hash lookup
-- per key (`transform` needs the constant table above).
(keys, values, origin) -> arrayMap(pair -> (pair.1 + origin, pair.2), arrayFilter(
    pair -> pair.1 > 0,
    arrayZip(arrayMap(k -> transform(k, spelling_keys, spelling_codes, toUInt16(0)), keys),
        values))) AS coded,
-- Sorted pairs -> Map(field number, value) of each field's first pair (a pair starts its
-- field where its field number differs from the one before; none: no pairs).
pairs -> arrayPopFront(arrayDifference(arrayPushFront(arrayMap(pair -> field_of(pair), pairs), 0)))
    AS field_starts,
pairs -> mapFromArrays(
    arrayFilter((n, start) -> start != 0, arrayMap(pair -> field_of(pair), pairs), field_starts(pairs)),
    arrayFilter((pair, start) -> start != 0, pairs, field_starts(pairs)).2) AS first_of_each,
-- A field's value in such a Map, else NULL (a Map answers '' for a missing key).
(m, name) -> if(mapContains(m, toUInt8(indexOf(field_names, name))),
    m[toUInt8(indexOf(field_names, name))], NULL) AS spelled,
v -> match(v, '^\\s*-?[0-9]{1,18}\\s*$') AS integral,
