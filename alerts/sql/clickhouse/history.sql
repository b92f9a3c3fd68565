-- Alerts fired, newest first, with how their deliveries went.
SELECT
    a.document AS document,
    formatDateTime(a.detected_at, '%Y-%m-%dT%H:%i:%S.%fZ') AS detected_at,
    countIf(o.status = 'delivered') AS sent,
    countIf(o.status = 'pending') AS pending,
    countIf(o.status = 'failed') AS failed,
    max(o.last_error) AS last_error
FROM (SELECT * FROM alerts FINAL) AS a
LEFT JOIN (SELECT * FROM alert_outbox FINAL) AS o ON o.alert_id = a.id
GROUP BY a.id, a.document, a.detected_at
ORDER BY a.detected_at DESC, a.id
LIMIT {limit:UInt32}
