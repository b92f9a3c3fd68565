-- Deliveries still owed.
SELECT count() AS n FROM alert_outbox FINAL WHERE status = 'pending'
