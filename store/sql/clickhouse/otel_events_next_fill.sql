-- One pass of the mapping into the new `events`.
INSERT INTO {own:Identifier}.events_next
SELECT * FROM {own:Identifier}.otel_events
