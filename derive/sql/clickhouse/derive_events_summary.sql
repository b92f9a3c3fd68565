-- Where a build from nothing starts: the newest insert time in `events` and the checksum
-- of the window before it (queries/incremental_clickhouse.py).
-- param window: UInt32
WITH (SELECT max(ingested_at) FROM events) AS top
SELECT
    toString(top) AS high,
    concat(toString(count()), ':', toString(sum(cityHash64(event_uid)))) AS recent
FROM events
WHERE ingested_at > top - toIntervalSecond(:window)
