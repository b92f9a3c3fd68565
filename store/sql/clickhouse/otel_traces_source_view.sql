-- The exporter's spans under a fixed name in dupescope's own database: those of the parts
-- a refresh reads (from `otel_window` on, where one is set), and those of the traces it
-- reads again (found by the exporter's TraceId bloom filter).
CREATE OR REPLACE VIEW {own:Identifier}.{view:Identifier} AS
SELECT *
FROM {source_db:Identifier}.{table:Identifier}
WHERE (_part IN (SELECT part FROM {own:Identifier}.{parts:Identifier})
       AND Timestamp >= (SELECT if(count() = 0, toDateTime64(0, 9, 'UTC'), min(read_from))
                         FROM {own:Identifier}.otel_window))
   OR TraceId IN (SELECT trace_id FROM {own:Identifier}.{traces:Identifier})
