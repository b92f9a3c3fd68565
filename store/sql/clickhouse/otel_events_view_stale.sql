-- Whether `events` is still a view, as an earlier version of the mapping made it.
SELECT name
FROM system.tables
WHERE database = {database:String} AND name = 'events' AND engine = 'View'
