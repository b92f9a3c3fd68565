-- Changes whenever the events change: the derived tables' cache key where the store keeps
-- no snapshot id of its own (ClickHouse, chDB). The hash of every event_uid catches a
-- replaced row that leaves the count and the newest time as they were.
SELECT
    count() AS n,
    toString(max(ts)) AS last,
    toString(sum(cityHash64(event_uid))) AS h
FROM events
