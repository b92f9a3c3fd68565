-- Forget how far the exporter's tables were read: the next refresh reads them whole.
TRUNCATE TABLE {own:Identifier}.otel_read
