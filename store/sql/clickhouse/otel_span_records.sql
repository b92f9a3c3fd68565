-- otel_span_kinds_stage (otel_span_kinds.sql, kept as a table in dupescope's own database
-- while events are refilled) -> one record per lifecycle event, before the contract's fields
-- are picked out (otel_events.sql): the span's own event at its start (unless a `deliver`
-- span event says when the execution was delivered), each step span event at its time,
-- and a Celery run's settle at its end. Producer events take no worker_id from the
-- resource alone (the stage names the spellings only the resource gives).
WITH
    recorded AS (
        SELECT
            trace_id,
            span_id,
            span_execution,
            arrayConcat(
                if(delivered_at = 0,
                    [(-1, start_ts, mapUpdate(
                        if(own_event IN ('outbox_write', 'enqueue', 'enqueue_deduped'),
                            mapFilter((k, v) -> NOT has(resource_worker_keys, k),
                                span_attrs),
                            span_attrs),
                        mapUpdate(map('event', own_event), span_row)))],
                    []),
                arrayMap(i -> (toInt64(i - 1), step_ts[i], mapUpdate(
                        mapUpdate(span_attrs, step_attrs[i]),
                        if(i = delivered_at,
                            mapUpdate(map('event', step_names[i]), span_row),
                            map('event', step_names[i])))),
                    steps),
                if(end_settle = '', [],
                    [(-2, fromUnixTimestamp64Nano(end_ns, 'UTC'), mapUpdate(span_attrs,
                        if(end_settle = 'ack', map('event', end_settle),
                            map('event', end_settle, 'reason', multiIf(
                                end_settle = 'nack'
                                    AND span_attrs['celery.retry.reason'] != '',
                                span_attrs['celery.retry.reason'],
                                failure != '', failure,
                                span_attrs['celery.state'])))))])
            ) AS records
        FROM otel_span_kinds_stage
        WHERE own_event != ''
    )
SELECT
    lower(hex(MD5(concat(trace_id, '\x1f', span_id, '\x1f', toString(record.1), '\x1f'))))
        AS record_uid,
    toDateTime64(record.2, 6, 'UTC') AS record_ts,
    -- As the decoder's setdefault: a span's own trace_id / span_id / execution_id wins.
    mapUpdate(
        if(span_execution IS NULL,
            map('trace_id', trace_id, 'span_id', span_id),
            map('trace_id', trace_id, 'span_id', span_id,
                'execution_id', assumeNotNull(span_execution))),
        mapFilter((k, v) -> k NOT IN ('job.event', 'ts', 'job.ts', 'timestamp', 'time',
            '@timestamp'), record.3)) AS record_attrs,
    'otel_traces' AS record_source
FROM recorded
ARRAY JOIN records AS record
