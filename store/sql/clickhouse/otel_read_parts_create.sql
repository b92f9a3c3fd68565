-- The parts a chunked read has taken of partitions it has not read whole yet: a read
-- killed halfway resumes after them (store/otel_chunks.py). A part merged since is read
-- again under its new name, and its rows replace themselves in `events`.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_read_parts (
    table String,
    name String
) ENGINE = ReplacingMergeTree ORDER BY (table, name)
