-- The values the dashboard's filters offer: job types, queues and services, with how many
-- events each has (the service is the `service.name` a source put in attrs).
SELECT 'job_type' AS field, job_type AS value, count(*) AS events
FROM events
WHERE job_type IS NOT NULL
GROUP BY job_type
UNION ALL
SELECT 'queue' AS field, queue AS value, count(*) AS events
FROM events
WHERE queue IS NOT NULL
GROUP BY queue
UNION ALL
SELECT 'service' AS field, service AS value, count(*) AS events
FROM (SELECT json_extract_string(attrs, '$."service.name"') AS service FROM events)
WHERE service IS NOT NULL AND service <> ''
GROUP BY service
ORDER BY field, events DESC, value
