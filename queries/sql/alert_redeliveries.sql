-- Redeliveries per job type in tumbling windows of event time: the `redelivery_storm`
-- alert rule. A redelivery is a `deliver` with delivery_attempt > 1; repeats of an
-- event_uid (the same batch ingested twice) count once. Reads `derived_redeliveries`.
-- param window_s: Int64
-- param min_count: Int64
SELECT
    job_type,
    CAST(floor(epoch(ts) / :window_s) AS BIGINT) AS bucket,
    count(DISTINCT event_uid) AS redeliveries,
    count(DISTINCT job_id) AS jobs,
    min(ts) AS first_ts,
    max(ts) AS last_ts
FROM derived_redeliveries
GROUP BY job_type, bucket
HAVING count(DISTINCT event_uid) >= :min_count
ORDER BY first_ts
