-- The sinks deliveries are still owed to.
SELECT DISTINCT sink FROM alert_outbox FINAL WHERE status = 'pending' ORDER BY sink
