-- A new, empty `events` to refill (same columns, sort key and index).
CREATE TABLE {own:Identifier}.events_next AS {own:Identifier}.events
