-- Redeliveries per job type in tumbling windows of event time: the `redelivery_storm`
-- alert rule (ClickHouse: epoch seconds through toUnixTimestamp).
-- param window_s: Int64
-- param min_count: Int64
SELECT
    job_type,
    intDiv(toUnixTimestamp(ts), :window_s) AS bucket,
    uniqExact(event_uid) AS redeliveries,
    uniqExact(job_id) AS jobs,
    min(ts) AS first_ts,
    max(ts) AS last_ts
FROM derived_redeliveries
GROUP BY job_type, bucket
HAVING uniqExact(event_uid) >= :min_count
ORDER BY first_ts
