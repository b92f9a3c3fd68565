-- The values the dashboard's filters offer, each event counted once (FINAL). ClickHouse:
-- JSON is read with JSONExtractString, which gives '' for a missing field; the union is
-- wrapped because ClickHouse applies a trailing ORDER BY to the last SELECT of a UNION
-- ALL only.
SELECT field, value, events
FROM (
    SELECT 'job_type' AS field, assumeNotNull(job_type) AS value, count(*) AS events
    FROM events FINAL
    WHERE job_type IS NOT NULL
    GROUP BY job_type
    UNION ALL
    SELECT 'queue' AS field, assumeNotNull(queue) AS value, count(*) AS events
    FROM events FINAL
    WHERE queue IS NOT NULL
    GROUP BY queue
    UNION ALL
    SELECT 'service' AS field, service AS value, count(*) AS events
    FROM (SELECT JSONExtractString(ifNull(attrs, '{}'), 'service.name') AS service
          FROM events FINAL)
    WHERE service <> ''
    GROUP BY service
)
ORDER BY field, events DESC, value
