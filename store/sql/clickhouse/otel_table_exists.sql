-- Whether dupescope's own database holds a table of this name.
SELECT name
FROM system.tables
WHERE database = {database:String} AND name = {name:String}
