-- The newest row time of one of the exporter's tables (microseconds since the epoch), read
-- from its newest day partition alone: where a read of the last minutes first starts, before
-- anything of the table has been read.
SELECT toUnixTimestamp64Micro(max(Timestamp)) AS newest_us, count() AS n
FROM {source_db:Identifier}.{table:Identifier}
WHERE _partition_id = {partition:String}
