-- The mapping of the rows read, added to `events` (a row read again replaces itself:
-- `events` is a ReplacingMergeTree by event).
INSERT INTO {own:Identifier}.events
SELECT * FROM {own:Identifier}.otel_events
