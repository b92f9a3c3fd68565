-- Pending deliveries to the given sinks (a JSON array of ids) whose next attempt is due,
-- oldest first. Deliveries queued for a sink this `watch` was not given are left out:
-- among the oldest they would fill every page and starve the sinks it was given.
SELECT o.alert_id, o.sink, o.attempts, a.document
FROM outbox AS o
JOIN alerts AS a ON a.id = o.alert_id
WHERE o.status = 'pending' AND o.next_attempt_at <= :now
  AND o.sink IN (SELECT value FROM json_each(:sinks))
ORDER BY o.next_attempt_at, a.detected_at
LIMIT :limit
