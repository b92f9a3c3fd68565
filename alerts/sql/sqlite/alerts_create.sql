-- An incident, once per stable id; `document` is the alert as sinks receive it.
CREATE TABLE IF NOT EXISTS alerts (
    id TEXT PRIMARY KEY,
    rule TEXT NOT NULL,
    severity TEXT NOT NULL,
    key TEXT,
    job_type TEXT,
    incident_ts TEXT,
    detected_at TEXT NOT NULL,
    document TEXT NOT NULL
)
