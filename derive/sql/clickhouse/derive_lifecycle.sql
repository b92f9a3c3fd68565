-- ClickHouse spelling (reads event_facts, whose ts_us both dialects share).
-- Worker process lifecycle events (worker_start, worker_stop), once each: the checklist's
-- crash-loop item reads them. Materialised once per store snapshot as `derived_lifecycle`.
SELECT event_uid, worker_id, service_version, event, ts_us
FROM event_facts
WHERE event IN ('worker_start', 'worker_stop') AND worker_id IS NOT NULL
