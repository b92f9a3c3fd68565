-- What the rows inserted since the window before `high` say, read from `events` before
-- anything is copied (only their insert time and uid, through the minmax index on
-- ingested_at): the newest insert time, the checksum of the window before it (what the
-- next derivation compares), and that of the window before the old `high` (whether a row
-- turned up late in it, and the derivation must read that window again).
-- param high: String
-- param window: UInt32
WITH (SELECT max(ingested_at) FROM events
      WHERE ingested_at > toDateTime64(:high, 6) - toIntervalSecond(:window)) AS top
SELECT
    toString(top) AS high,
    concat(toString(countIf(ingested_at > top - toIntervalSecond(:window))), ':',
           toString(sumIf(cityHash64(event_uid), ingested_at > top - toIntervalSecond(:window))))
        AS recent,
    concat(toString(countIf(ingested_at <= toDateTime64(:high, 6))), ':',
           toString(sumIf(cityHash64(event_uid), ingested_at <= toDateTime64(:high, 6))))
        AS before
FROM events
WHERE ingested_at > toDateTime64(:high, 6) - toIntervalSecond(:window)
