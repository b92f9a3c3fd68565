-- The mapping of the rows read, added to `events` (a row read again replaces itself:
-- `events` is a ReplacingMergeTree by event); a first read may cover any number of days.
INSERT INTO {own:Identifier}.events
SELECT * FROM {own:Identifier}.otel_events
SETTINGS max_partitions_per_insert_block = 0
