-- Record how far partitions have now been read.
INSERT INTO {own:Identifier}.otel_read (table, partition_id, max_block, version)
SELECT tupleElement(read, 1), tupleElement(read, 2), tupleElement(read, 3),
       toUnixTimestamp64Micro(now64(6))
FROM (SELECT arrayJoin(arrayZip({tables:Array(String)}, {partitions:Array(String)},
                                {blocks:Array(Int64)})) AS read)
