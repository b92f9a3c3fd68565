-- What `events` was last refilled from, so that a new process reuses it.
CREATE TABLE IF NOT EXISTS {own:Identifier}.otel_refreshed (
    fingerprint String,
    version UInt64
) ENGINE = ReplacingMergeTree(version) ORDER BY tuple()
