-- Deliveries still owed.
SELECT count(*) FROM outbox WHERE status = 'pending'
