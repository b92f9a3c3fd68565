-- Forget the parts chunked reads took: the next refresh reads the tables whole.
TRUNCATE TABLE {own:Identifier}.otel_read_parts
