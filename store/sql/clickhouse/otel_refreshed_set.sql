-- Record what `events` now holds (a new row version).
INSERT INTO {own:Identifier}.otel_refreshed
SELECT {fingerprint:String}, toUnixTimestamp64Micro(now64(6))
