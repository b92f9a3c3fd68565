-- The exporter's tables' active parts, from part metadata (no column read): each insert
-- makes a part of new block numbers in its partition, and a merge one spanning its inputs'.
-- `rows` sizes the chunks of a read (store/otel_chunks.py).
SELECT table, partition_id, name, min_block_number, max_block_number, rows
FROM system.parts
WHERE database = {database:String} AND table IN {tables:Array(String)} AND active
