-- The parts chunked reads have taken (otel_read_parts_create.sql).
SELECT DISTINCT table, name
FROM {own:Identifier}.otel_read_parts
