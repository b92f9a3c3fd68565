-- The event_uids one part holds more than once (a batch sent twice): a repeat has its
-- event's job, so it is in the same part. Few, held apart so that only they go through
-- DISTINCT ON (see build_part_events.sql).
SELECT event_uid
FROM build_part_rows
WHERE build_event
GROUP BY event_uid
HAVING count(*) > 1
