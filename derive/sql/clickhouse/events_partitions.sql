-- The days `events` holds (from part metadata, no column read): one gone means
-- retention dropped it.
SELECT groupUniqArray(partition_id) AS partitions
FROM system.parts
WHERE database = {database:String} AND table = {table:String} AND active
