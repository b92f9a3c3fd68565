-- Every event once (FINAL collapses repeats of an event_uid that no merge has yet): what
-- the derived tables that read `unique_events` read on ClickHouse and chDB, as a view.
SELECT * FROM events FINAL
