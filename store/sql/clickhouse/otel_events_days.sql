-- The days `events` holds.
SELECT DISTINCT partition_id
FROM system.parts
WHERE database = {database:String} AND table = 'events' AND active
