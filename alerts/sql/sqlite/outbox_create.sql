-- One delivery owed per alert and sink; status is pending, delivered or failed.
CREATE TABLE IF NOT EXISTS outbox (
    alert_id TEXT NOT NULL REFERENCES alerts(id),
    sink TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (alert_id, sink)
)
