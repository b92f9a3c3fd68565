-- Worker process lifecycle events (worker_start, worker_stop), once each: the checklist's
-- crash-loop item reads them. Materialised once per store snapshot as `derived_lifecycle`.
-- Reads the events themselves (collapsed repeats), not event_facts: these need no
-- execution. queries/sql/clickhouse/ has the ClickHouse spelling.
SELECT event_uid, worker_id, service_version, event, epoch_us(ts) AS ts_us
FROM unique_events
WHERE event IN ('worker_start', 'worker_stop') AND worker_id IS NOT NULL
