-- How far each partition of the exporter's tables has been read into `events`: every
-- block up to `max_block`.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_read (
    table String,
    partition_id String,
    max_block Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version) ORDER BY (table, partition_id)
