-- otel_span_kinds_stage (otel_span_kinds.sql, kept as a table in dupescope's own database
-- while events are refilled) -> one record per lifecycle event, with the contract's fields
-- picked (otel_events.sql checks and shapes them): the span's own event at its start
-- (unless a `deliver` span event says when the execution was delivered), each step span
-- event at its time, and a Celery run's settle at its end.
--
-- A record's attributes are the span's (the resource's under its own), under those the
-- step's for a step, under those the record's own (`event`, the span's name and end, a
-- settle's reason); the span's trace_id, span_id and execution fill in where no attribute
-- names them (the decoder's setdefault). No record builds that Map: the fields are picked
-- once per span and once per step, a step's spelling of a field winning over the span's
-- where it comes first or is the same, and `rest` keeps the attributes that spell no field.
-- Producer events take no worker_id from the resource alone (the stage names the
-- spellings only the resource gives).
WITH
    -- include: otel_spellings
    spans AS (
        SELECT
            trace_id, span_id, start_ts, own_event, delivered_at, steps, step_ts, step_names,
            step_attrs, span_row, end_settle, end_ns, failure, span_attrs,
            [(toUInt16(indexOf(field_names, 'trace_id') * 32 + 6), trace_id),
             (toUInt16(indexOf(field_names, 'span_id') * 32 + 6), span_id)] AS id_pairs,
            arraySort(arrayConcat(coded(mapKeys(span_attrs), mapValues(span_attrs), 1),
                id_pairs)) AS span_pairs,
            -- A producer's own event, without the worker spellings only the resource gives.
            if(own_event IN ('outbox_write', 'enqueue', 'enqueue_deduped')
                    AND notEmpty(resource_worker_keys),
                arraySort(arrayConcat(coded(
                    arrayFilter(k -> NOT has(resource_worker_keys, k), mapKeys(span_attrs)),
                    arrayFilter((v, k) -> NOT has(resource_worker_keys, k),
                        mapValues(span_attrs), mapKeys(span_attrs)), 1),
                    id_pairs)),
                span_pairs) AS own_pairs,
            mapUpdate(
                if(span_execution IS NULL, CAST(map(), 'Map(String, String)'),
                    map('execution_id', assumeNotNull(span_execution))),
                mapFilter((k, v) -> k NOT IN spellings, span_attrs)) AS span_rest
        FROM otel_span_kinds_stage
        WHERE own_event != ''
    )
SELECT
    lower(hex(MD5(concat(trace_id, '\x1f', span_id, '\x1f-1\x1f')))) AS record_uid,
    toDateTime64(start_ts, 6, 'UTC') AS record_ts,
    'otel_traces' AS record_source,
    own_event AS kind,
    first_of_each(own_pairs) AS fields,
    mapUpdate(span_rest, span_row) AS rest
FROM spans
WHERE delivered_at = 0
UNION ALL
SELECT
    lower(hex(MD5(concat(trace_id, '\x1f', span_id, '\x1f', toString(toInt64(i - 1)), '\x1f')))),
    toDateTime64(step_ts[i], 6, 'UTC'),
    'otel_traces',
    step_names[i],
    first_of_each(arraySort(arrayConcat(
        coded(mapKeys(step_attrs[i]), mapValues(step_attrs[i]), 0), span_pairs))),
    mapUpdate(mapUpdate(span_rest, mapFilter((k, v) -> k NOT IN spellings, step_attrs[i])),
        if(i = delivered_at, span_row, CAST(map(), 'Map(String, String)')))
FROM spans
ARRAY JOIN steps AS i
UNION ALL
SELECT
    lower(hex(MD5(concat(trace_id, '\x1f', span_id, '\x1f-2\x1f')))),
    toDateTime64(fromUnixTimestamp64Nano(end_ns, 'UTC'), 6, 'UTC'),
    'otel_traces',
    end_settle,
    first_of_each(span_pairs),
    if(end_settle = 'ack', span_rest, mapUpdate(span_rest, map('reason', multiIf(
        end_settle = 'nack' AND span_attrs['celery.retry.reason'] != '',
        span_attrs['celery.retry.reason'],
        failure != '', failure,
        span_attrs['celery.state']))))
FROM spans
WHERE end_settle != ''
