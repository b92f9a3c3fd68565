-- Log records of otel_logs -> each record's attributes as one Map (otel_log_records.sql
-- then picks the contract's fields), as collectors/otlp.py decodes OTLP log records: the resource's attributes (and host:pid as the worker), the record's
-- over them, a body that is a JSON object over those (the exporter writes a structured
-- body as JSON text), any other body kept as `msg`; the record's time unless the
-- attributes spell one (ts, timestamp, time: RFC 3339 or epoch s/ms/us/ns by size).
WITH
    ['ts', 'job.ts', 'timestamp', 'time', '@timestamp'] AS ts_keys,
    based AS (
        SELECT
            *,
            mapUpdate(
                if(mapContains(resource_attrs, 'host.name')
                        AND mapContains(resource_attrs, 'process.pid'),
                    mapUpdate(resource_attrs, map('resource.worker_id', concat(
                        resource_attrs['host.name'], ':', resource_attrs['process.pid']))),
                    resource_attrs),
                own_attrs) AS with_attrs,
            startsWith(trimLeft(body), '{') AND isValidJSON(body) AS structured,
            if(structured,
                mapFromArrays(
                    arrayMap(kv -> kv.1, JSONExtractKeysAndValuesRaw(body)),
                    arrayMap(kv -> if(startsWith(kv.2, '"'), JSONExtractString(kv.2), kv.2),
                        JSONExtractKeysAndValuesRaw(body))),
                map()) AS body_attrs,
            multiIf(
                structured, mapUpdate(with_attrs, body_attrs),
                body != '' AND NOT mapContains(with_attrs, 'msg'),
                mapUpdate(with_attrs, map('msg', body)),
                with_attrs) AS log_attrs,
            arrayFirst(k -> mapContains(log_attrs, k), ts_keys) AS ts_key,
            trimBoth(log_attrs[ts_key]) AS ts_text,
            multiIf(
                ts_key = '', toDateTime64(record_time, 6, 'UTC'),
                match(ts_text, '^-?[0-9]+(\\.[0-9]+)?$'), multiIf(
                    abs(toFloat64(ts_text)) < 1e11,
                    fromUnixTimestamp64Micro(toInt64(round(toFloat64(ts_text) * 1e6)), 'UTC'),
                    abs(toFloat64(ts_text)) < 1e14,
                    fromUnixTimestamp64Micro(toInt64(round(toFloat64(ts_text) * 1e3)), 'UTC'),
                    abs(toFloat64(ts_text)) < 1e17,
                    fromUnixTimestamp64Micro(toInt64(toFloat64(ts_text)), 'UTC'),
                    fromUnixTimestamp64Micro(intDiv(toInt64OrZero(ts_text), 1000), 'UTC')),
                parseDateTime64BestEffortOrNull(ts_text, 6, 'UTC')) AS parsed_ts
        FROM otel_logs_rows
    )
SELECT
    lower(hex(MD5(concat(toString(record_time), '\x1f', trace_id, '\x1f', span_id, '\x1f',
        body, '\x1f', toJSONString(log_attrs))))) AS record_uid,
    assumeNotNull(parsed_ts) AS record_ts,
    mapUpdate(
        mapFilter((k, v) -> (k = 'trace_id' AND trace_id != '')
            OR (k = 'span_id' AND span_id != ''), map('trace_id', trace_id, 'span_id', span_id)),
        mapFilter((k, v) -> k NOT IN ts_keys, log_attrs)) AS record_attrs,
    'otel_logs' AS record_source
FROM based
WHERE parsed_ts IS NOT NULL
