-- Record an alert unless its id is known (the row count says which).
INSERT OR IGNORE INTO alerts (id, rule, severity, key, job_type, incident_ts, detected_at, document)
VALUES (:id, :rule, :severity, :key, :job_type, :incident_ts, :detected_at, :document)
