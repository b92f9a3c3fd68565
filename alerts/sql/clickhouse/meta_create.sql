-- Small named values kept across restarts (the watermark), each change a new version.
CREATE TABLE IF NOT EXISTS alert_meta (
    name String,
    value String,
    version UInt64
) ENGINE = ReplacingMergeTree(version) ORDER BY name
