-- The mapping of the rows read, added to `events` (a row read again replaces itself:
-- `events` is a ReplacingMergeTree by event); a first read may cover any number of days.
-- The insert does not replace rows within itself (optimize_on_insert = 0): every reader
-- of `events` collapses an event read twice (FINAL, or one row per event_uid), as it must
-- across inserts anyway, and that pass was a third of the write.
-- On a server that fuses a filter into an ARRAY JOIN, otel_events_append_unfused.sql.
INSERT INTO {own:Identifier}.events
SELECT * FROM {own:Identifier}.otel_events
SETTINGS max_partitions_per_insert_block = 0, optimize_on_insert = 0
