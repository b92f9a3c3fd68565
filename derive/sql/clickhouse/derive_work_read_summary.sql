-- What the rows read say: the newest insert time, the checksum of the window before it
-- (what the next derivation compares), and that of the window before the old `high`.
-- param high: String
-- param window: UInt32
WITH (SELECT max(ingested_at) FROM derive_work_read) AS top
SELECT
    toString(top) AS high,
    count() AS read_rows,
    concat(toString(countIf(ingested_at > top - toIntervalSecond(:window))), ':',
           toString(sumIf(cityHash64(event_uid), ingested_at > top - toIntervalSecond(:window))))
        AS recent,
    concat(toString(countIf(ingested_at <= toDateTime64(:high, 6))), ':',
           toString(sumIf(cityHash64(event_uid), ingested_at <= toDateTime64(:high, 6))))
        AS before
FROM derive_work_read
