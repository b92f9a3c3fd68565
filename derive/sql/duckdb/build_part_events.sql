-- One part's own events, each once, as `unique_events` (see build_parts.sql): the rows of
-- no repeated event_uid as they are, and one row of each repeated one.
SELECT * EXCLUDE (build_event)
FROM build_part_rows
ANTI JOIN build_part_repeats USING (event_uid)
WHERE build_event
UNION ALL BY NAME
SELECT DISTINCT ON (event_uid) * EXCLUDE (build_event)
FROM build_part_rows
SEMI JOIN build_part_repeats USING (event_uid)
WHERE build_event
