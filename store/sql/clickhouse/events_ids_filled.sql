-- Whether the id index was filled from the rows `events` held when it was made (a table
-- made before the index existed; made since, every row reached it through its view).
SELECT count() AS filled
FROM system.tables
WHERE database = {database:String} AND name = 'events_ids_filled'
