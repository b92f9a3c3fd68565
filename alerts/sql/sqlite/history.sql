-- Alerts fired, newest first, with how their deliveries went.
SELECT
    a.document,
    a.detected_at,
    count(*) FILTER (WHERE o.status = 'delivered'),
    count(*) FILTER (WHERE o.status = 'pending'),
    count(*) FILTER (WHERE o.status = 'failed'),
    max(o.last_error)
FROM alerts AS a
LEFT JOIN outbox AS o ON o.alert_id = a.id
GROUP BY a.id
ORDER BY a.detected_at DESC, a.id
LIMIT :limit
