-- An incident, once per stable id; `document` is the alert as sinks receive it.
CREATE TABLE IF NOT EXISTS alerts (
    id String,
    rule LowCardinality(String),
    severity LowCardinality(String),
    key Nullable(String),
    job_type Nullable(String),
    incident_ts Nullable(DateTime64(6, 'UTC')),
    detected_at DateTime64(6, 'UTC'),
    document String
) ENGINE = ReplacingMergeTree ORDER BY id
