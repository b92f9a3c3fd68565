-- The sinks deliveries are still owed to.
SELECT DISTINCT sink FROM outbox WHERE status = 'pending' ORDER BY sink
