-- How long ago the derivation lock was taken (no row: nobody holds it).
SELECT dateDiff('second', metadata_modification_time, now()) AS age
FROM system.tables
WHERE database = {database:String} AND name = 'derived_deriving'
