-- otel_spans.sql for the exporter's `json: true` layout, where the attribute columns are
-- JSON: ClickHouse stores a dotted key (`host.name`) as a nested path, so each object is
-- flattened back into dotted keys (four levels deep, as attribute keys are in practice),
-- and a value is its JSON text (a string unquoted: what the Map layout would hold).
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
    Timestamp AS start_ts,
    TraceId AS trace_id,
    SpanId AS span_id,
    ParentSpanId AS parent_span_id,
    toString(SpanName) AS span_name,
    toString(SpanKind) AS span_kind,
    Duration AS duration_ns,
    StatusMessage AS status_message,
    flat_json(toJSONString(ResourceAttributes)) AS resource_attrs,
    flat_json(toJSONString(SpanAttributes)) AS own_attrs,
    `Events.Timestamp` AS step_ts,
    CAST(`Events.Name`, 'Array(String)') AS step_names,
    arrayMap(a -> flat_json(toJSONString(a)), `Events.Attributes`) AS step_attrs
FROM otel_traces_source
