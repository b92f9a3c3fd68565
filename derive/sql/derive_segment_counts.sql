-- Per segment of the embedded store: how many events it holds and the time they span
-- (field ''), and how many carry each job type, queue and service: what the store
-- summary and the filter values add up, so a new segment is counted alone. Reads
-- `segment_rows` (events with the `segment` they are stored in). Kept as the embedded
-- store's `derived_segment_counts`.
SELECT segment, '' AS field, '' AS value, count(*) AS events, min(ts) AS first_ts,
       max(ts) AS last_ts
FROM segment_rows
GROUP BY segment
UNION ALL
SELECT segment, 'job_type' AS field, job_type AS value, count(*) AS events, NULL, NULL
FROM segment_rows
WHERE job_type IS NOT NULL
GROUP BY segment, job_type
UNION ALL
SELECT segment, 'queue' AS field, queue AS value, count(*) AS events, NULL, NULL
FROM segment_rows
WHERE queue IS NOT NULL
GROUP BY segment, queue
UNION ALL
SELECT segment, 'service' AS field, service AS value, count(*) AS events, NULL, NULL
FROM (
    SELECT segment, json_extract_string(attrs, '$."service.name"') AS service
    FROM segment_rows
)
WHERE service IS NOT NULL AND service <> ''
GROUP BY segment, service
