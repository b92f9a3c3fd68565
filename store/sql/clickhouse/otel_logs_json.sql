-- otel_logs.sql for the exporter's `json: true` layout: the attribute columns are JSON,
-- flattened back into dotted keys as in otel_spans_json.sql.
WITH
    -- One level of nesting undone: {"a": {"b": 1}} -> [("a.b", "1")].
    pairs -> arrayFlatten(arrayMap(
        kv -> if(startsWith(kv.2, '{') AND kv.2 != '{}',
            arrayMap(x -> (concat(kv.1, '.', x.1), x.2), JSONExtractKeysAndValuesRaw(kv.2)),
            [kv]),
        pairs)) AS unnest_level,
    pairs -> mapFromArrays(
        arrayMap(kv -> kv.1, pairs),
        arrayMap(kv -> if(startsWith(kv.2, '"'), JSONExtractString(kv.2), kv.2), pairs))
        AS as_map,
    text -> as_map(unnest_level(unnest_level(unnest_level(
        JSONExtractKeysAndValuesRaw(text))))) AS flat_json
SELECT
    Timestamp AS record_time,
    TraceId AS trace_id,
    SpanId AS span_id,
    Body AS body,
    flat_json(toJSONString(ResourceAttributes)) AS resource_attrs,
    flat_json(toJSONString(LogAttributes)) AS own_attrs
FROM otel_logs_source
