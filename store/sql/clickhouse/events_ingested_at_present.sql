-- Whether `events` records when each row was inserted (a table made before it did not).
SELECT count() AS present
FROM system.columns
WHERE database = {database:String} AND table = 'events' AND name = 'ingested_at'
