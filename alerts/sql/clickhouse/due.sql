-- Pending deliveries whose next attempt is due, oldest first.
SELECT alert_id, sink, attempts, document
FROM alert_outbox FINAL
WHERE status = 'pending' AND next_attempt_at <= {now:DateTime64(6, 'UTC')}
ORDER BY next_attempt_at
LIMIT {limit:UInt32}
