-- The next read takes the rows at or after `read_from` of the parts it reads.
INSERT INTO {own:Identifier}.otel_window (read_from) VALUES ({read_from:DateTime64(9, 'UTC')})
