-- A delivery's outcome; a NULL status or next attempt leaves that column as it was.
UPDATE outbox SET
    status = coalesce(:status, status),
    attempts = :attempts,
    next_attempt_at = coalesce(:next_attempt_at, next_attempt_at),
    last_error = :last_error,
    updated_at = :updated_at
WHERE alert_id = :alert_id AND sink = :sink
