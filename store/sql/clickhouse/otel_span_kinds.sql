-- Spans of otel_traces -> what each says of a job: its own event, its steps, its execution
-- (otel_span_records.sql then makes one record per lifecycle event, its fields picked).
-- The same rules as dupescope's OTLP decoder
-- (collectors/otlp.py), so the exporter's tables give the rows an OTLP collector would:
-- - a span whose `job.event` / `event` attribute or name is an event kind records it;
--   a PRODUCER span naming a job, or Celery's publish span, is an `enqueue`;
--   else `messaging.operation.type` names it; else Celery's `run/<task>` is a `deliver`;
-- - a span that names none but has lifecycle steps as span events, or child spans named
--   by a step, or a job_id and a delivery attempt, is an execution: its start is `deliver`
--   (unless a `deliver` span event says when), its span events are its steps;
-- - a Celery run span with no settle of its own settles at its end from `celery.state`;
-- - producer events take no worker_id from the resource alone.
-- Every attribute value is a string here, as the exporter writes it.
WITH
    ['outbox_write', 'enqueue', 'enqueue_deduped', 'deliver', 'lock_acquire',
     'lock_contended', 'lock_renew', 'lock_release', 'lock_expired', 'idempotency_hit',
     'side_effect', 'occ_conflict', 'commit', 'ack', 'nack', 'fail', 'worker_start',
     'worker_stop'] AS kinds,
    ['lock_acquire', 'lock_contended', 'lock_renew', 'lock_release', 'lock_expired',
     'idempotency_hit', 'side_effect', 'occ_conflict', 'commit', 'ack', 'nack', 'fail']
        AS worker_steps,
    ['job_id', 'job.job_id', 'messaging.message.id', 'messaging.message_id'] AS job_id_keys,
    ['delivery_attempt', 'job.delivery_attempt', 'celery.retries',
     'messaging.gcp_pubsub.message.delivery_attempt',
     'messaging.servicebus.message.delivery_count', 'aws.sqs.approximate_receive_count',
     'ApproximateReceiveCount'] AS attempt_keys,
    ['worker_id', 'job.worker_id', 'resource.worker_id', 'service.instance.id']
        AS worker_keys,
    map('create', 'enqueue', 'send', 'enqueue', 'publish', 'enqueue', 'receive', 'deliver',
        'process', 'deliver', 'deliver', 'deliver', 'settle', 'ack') AS operations,
    map('SUCCESS', 'ack', 'IGNORED', 'ack', 'RETRY', 'nack', 'REJECTED', 'nack',
        'FAILURE', 'fail') AS celery_settles,
    -- Spans with a lifecycle step as a child span, read now or earlier: those are
    -- executions (otel_step_parents, refilled by each refresh).
    step_parents AS (SELECT parent_span_id FROM otel_step_parents),
    based AS (
        SELECT
            *,
            if(mapContains(resource_attrs, 'host.name')
                    AND mapContains(resource_attrs, 'process.pid'),
                mapUpdate(resource_attrs, map('resource.worker_id',
                    concat(resource_attrs['host.name'], ':', resource_attrs['process.pid']))),
                resource_attrs) AS base_attrs,
            mapUpdate(base_attrs, own_attrs) AS merged_attrs,
            -- What a Celery span implies: its attempt is retries + 1, + 1 more where the
            -- transport flags the delivery as redelivered.
            merged_attrs['celery.action'] = 'run'
                OR mapContains(merged_attrs, 'celery.delivery_info') AS celery_attempted,
            if(mapContains(merged_attrs, 'celery.retries'),
                if(match(trimBoth(merged_attrs['celery.retries']), '^[0-9]+$'),
                    toInt64OrNull(trimBoth(merged_attrs['celery.retries'])), NULL),
                0) AS celery_retries,
            if((mapContains(own_attrs, 'celery.action')
                    OR mapContains(own_attrs, 'celery.delivery_info'))
                    AND celery_attempted AND celery_retries IS NOT NULL,
                mapUpdate(merged_attrs, map('celery.delivery_attempt', toString(assumeNotNull(
                    celery_retries + 1 + match(merged_attrs['celery.delivery_info'],
                        '[\'"]redelivered[\'"]\\s*:\\s*(True|true)\\b'))))),
                merged_attrs) AS span_attrs
        FROM otel_spans
    ),
    named AS (
        SELECT
            *,
            span_attrs['celery.action'] = 'apply_async' OR startsWith(span_name, 'apply_async/')
                OR (span_kind IN ('Producer', 'SPAN_KIND_PRODUCER', 'PRODUCER')
                    AND hasAny(mapKeys(span_attrs), job_id_keys)) AS publish,
            multiIf(
                span_attrs['job.event'] IN kinds, span_attrs['job.event'],
                span_attrs['event'] IN kinds, span_attrs['event'],
                span_name IN kinds, span_name,
                '') AS spelled,
            arrayFirst(k -> mapContains(span_attrs, k),
                ['messaging.operation.type', 'messaging.operation']) AS operation_key,
            multiIf(
                spelled != '', if(publish AND spelled = 'deliver', 'enqueue', spelled),
                publish, 'enqueue',
                operation_key != '', operations[span_attrs[operation_key]],
                span_attrs['celery.action'] = 'run', 'deliver',
                '') AS stated_event,
            arrayFilter(i -> step_names[i] IN kinds, arrayEnumerate(step_names)) AS steps,
            if(stated_event = '' AND (notEmpty(steps)
                    OR span_id IN (SELECT parent_span_id FROM step_parents)
                    OR (hasAny(mapKeys(span_attrs), job_id_keys)
                        AND hasAny(mapKeys(span_attrs), attempt_keys))),
                'deliver', stated_event) AS own_event,
            multiIf(
                own_event IN worker_steps AND parent_span_id != '', parent_span_id,
                notEmpty(steps) OR own_event = 'deliver', span_id,
                NULL) AS span_execution,
            -- A `deliver` span event is the execution's delivery: the start is no other.
            if(own_event = 'deliver', indexOf(step_names, 'deliver'), 0) AS delivered_at,
            toUnixTimestamp64Nano(start_ts) + toInt64(duration_ns) AS end_ns,
            if(own_event = 'deliver',
                map('span.name', span_name, 'span.end_us', toString(intDiv(end_ns, 1000))),
                map('span.name', span_name)) AS span_row,
            -- The settle a Celery run span's end records, where it names none itself.
            if(own_event = 'deliver' AND span_attrs['celery.action'] = 'run'
                    AND NOT mapContains(own_attrs, 'job.event')
                    AND NOT mapContains(own_attrs, 'event')
                    AND NOT hasAny(arrayMap(i -> step_names[i], steps), ['ack', 'nack', 'fail']),
                celery_settles[span_attrs['celery.state']], '') AS end_settle,
            arrayFirstIndex((n, a) -> n = 'exception' AND a['exception.type'] != '',
                step_names, step_attrs) AS exception_at,
            if(exception_at = 0, status_message,
                if(step_attrs[exception_at]['exception.message'] != '',
                    concat(step_attrs[exception_at]['exception.type'], ': ',
                        step_attrs[exception_at]['exception.message']),
                    step_attrs[exception_at]['exception.type'])) AS failure
        FROM based
    )
-- Spans that name a job but record no event are kept too (otel_idle_spans_add.sql): a
-- step child span read later makes them executions. Only what otel_span_records.sql and
-- the bookkeeping read is kept: the stage is written and read once per chunk, and the
-- resource's and the merged attribute maps would be most of its bytes.
SELECT
    trace_id, span_id, start_ts, own_event, span_execution, delivered_at, span_attrs,
    steps, step_ts, step_names, step_attrs, span_row, end_settle, end_ns, failure,
    -- The worker spellings only the resource names: a producer event does not take them.
    arrayFilter(k -> mapContains(base_attrs, k) AND NOT mapContains(own_attrs, k),
        worker_keys) AS resource_worker_keys
FROM named
WHERE own_event != '' OR hasAny(mapKeys(span_attrs), job_id_keys)
