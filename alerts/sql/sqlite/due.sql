-- Pending deliveries whose next attempt is due, oldest first.
SELECT o.alert_id, o.sink, o.attempts, a.document
FROM outbox AS o
JOIN alerts AS a ON a.id = o.alert_id
WHERE o.status = 'pending' AND o.next_attempt_at <= :now
ORDER BY o.next_attempt_at, a.detected_at
LIMIT :limit
