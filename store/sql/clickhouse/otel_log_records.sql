-- otel_log_attrs (otel_log_attrs.sql: each log record's attributes as one Map) -> one
-- record per log record with the contract's fields picked, as otel_span_records.sql gives
-- for spans (otel_events.sql checks and shapes them): the event kind from `event`,
-- `job.event` or the messaging operation, each field's first spelling present, and `rest`,
-- the attributes that spell no field.
WITH
    -- include: otel_spellings
    kinded AS (
        SELECT
            *,
            multiIf(
                mapContains(record_attrs, 'event'), record_attrs['event'],
                mapContains(record_attrs, 'job.event'), record_attrs['job.event'],
                mapContains(record_attrs, 'messaging.operation.type'),
                operations[record_attrs['messaging.operation.type']],
                mapContains(record_attrs, 'messaging.operation'),
                operations[record_attrs['messaging.operation']],
                '') AS kind
        FROM otel_log_attrs
    )
SELECT
    record_uid,
    record_ts,
    record_source,
    kind,
    first_of_each(arraySort(coded(mapKeys(record_attrs), mapValues(record_attrs), 0)))
        AS fields,
    mapFilter((k, v) -> k NOT IN spellings, record_attrs) AS rest
FROM kinded
