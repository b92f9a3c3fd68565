-- How long the oldest row no derivation has read yet has waited, in seconds (0: none).
SELECT if(count() = 0, 0,
          (toUnixTimestamp64Micro(now64(6)) - toUnixTimestamp64Micro(min(ingested_at))) / 1e6)
    AS lag
FROM {db:Identifier}.events
WHERE ingested_at > toDateTime64({high:String}, 6)
