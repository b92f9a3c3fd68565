-- Whether `events` took rows since the derived tables last read it
-- (queries/incremental_clickhouse.py): the rows inserted after `high`, and a checksum of
-- those inserted in the window before it (a row that became visible late changes it).
-- param high: String
-- param window: UInt32
SELECT
    countIf(ingested_at > toDateTime64(:high, 6)) AS new_rows,
    concat(toString(countIf(ingested_at <= toDateTime64(:high, 6))), ':',
           toString(sumIf(cityHash64(event_uid), ingested_at <= toDateTime64(:high, 6))))
        AS recent
FROM events
WHERE ingested_at > toDateTime64(:high, 6) - toIntervalSecond(:window)
