-- The next read takes every row of the parts it reads.
TRUNCATE TABLE {own:Identifier}.otel_window
