-- Pending deliveries to the given sinks whose next attempt is due, oldest first.
-- Deliveries queued for a sink this `watch` was not given are left out: among the oldest
-- they would fill every page and starve the sinks it was given.
SELECT alert_id, sink, attempts, document
FROM alert_outbox FINAL
WHERE status = 'pending' AND next_attempt_at <= {now:DateTime64(6, 'UTC')}
  AND has({sinks:Array(String)}, sink)
ORDER BY next_attempt_at
LIMIT {limit:UInt32}
