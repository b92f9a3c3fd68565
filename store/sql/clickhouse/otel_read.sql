-- How far each partition has been read (the newest record of each).
SELECT table, partition_id, argMax(max_block, version) AS max_block
FROM {own:Identifier}.otel_read
GROUP BY table, partition_id
