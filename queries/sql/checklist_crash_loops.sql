-- Do workers restart without a clean stop, and does it start with a new service_version?
-- A worker_start whose worker's previous lifecycle event was also a worker_start is an
-- unclean restart (the process before it died); per worker and version.
-- param since_us: Int64
-- param until_us: Int64
WITH lifecycle AS (
    SELECT
        worker_id,
        service_version,
        event,
        ts_us,
        lag(event) OVER (PARTITION BY worker_id ORDER BY ts_us, event_uid) AS previous_event,
        lag(service_version) OVER (PARTITION BY worker_id ORDER BY ts_us, event_uid)
            AS previous_version
    FROM derived_lifecycle
)
SELECT
    worker_id,
    max(service_version) AS service_version,
    countIf(event = 'worker_start') AS starts,
    countIf(event = 'worker_stop') AS stops,
    countIf(event = 'worker_start' AND previous_event = 'worker_start') AS unclean_restarts,
    countIf(event = 'worker_start' AND previous_version IS NOT NULL
            AND previous_version <> coalesce(service_version, '')) AS version_changes,
    min(ts_us) AS first_us,
    max(ts_us) AS last_us
FROM lifecycle
WHERE (:since_us IS NULL OR ts_us >= :since_us)
  AND (:until_us IS NULL OR ts_us < :until_us)
GROUP BY worker_id, coalesce(service_version, '')
ORDER BY worker_id, first_us
