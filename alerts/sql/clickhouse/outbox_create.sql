-- One delivery owed per alert and sink, each change a new row version (read with FINAL).
-- It holds the alert document too: outbox rows are written before their alert.
CREATE TABLE IF NOT EXISTS alert_outbox (
    alert_id String,
    sink String,
    status LowCardinality(String),
    attempts UInt32,
    next_attempt_at DateTime64(6, 'UTC'),
    last_error Nullable(String),
    updated_at DateTime64(6, 'UTC'),
    document String,
    version UInt64
) ENGINE = ReplacingMergeTree(version) ORDER BY (alert_id, sink)
