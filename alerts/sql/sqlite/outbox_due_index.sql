-- What `due` reads: pending rows by next attempt.
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_attempt_at)
