-- A table's columns and their types, in order (a derived table's kept form copies them).
SELECT name, type
FROM system.columns
WHERE database = {database:String} AND table = {table:String}
ORDER BY position
