-- How many distinct events the store holds (repeats of an event_uid counted once): what
-- an ingest compares before and after to say how many of its events were new.
SELECT count(DISTINCT event_uid) AS uids
FROM events
