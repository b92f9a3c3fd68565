-- The traces of the spans in the parts read (the exporter's TraceId bloom filter then
-- finds their other spans).
INSERT INTO {own:Identifier}.{traces:Identifier} (trace_id)
SELECT DISTINCT TraceId
FROM {source_db:Identifier}.{table:Identifier}
WHERE _part IN (SELECT part FROM {own:Identifier}.{parts:Identifier})
