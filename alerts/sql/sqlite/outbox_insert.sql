-- Owe one delivery of a new alert to one sink, due at once.
INSERT OR IGNORE INTO outbox (alert_id, sink, status, attempts, next_attempt_at, updated_at)
VALUES (:alert_id, :sink, 'pending', 0, :now, :now)
