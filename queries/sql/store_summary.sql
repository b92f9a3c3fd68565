-- What the store holds in one cheap pass: how many events and the time span they cover.
-- The dashboard uses it for the time filter's range, for its footer, and (count + newest
-- ts) as a cache key where a store has no cheaper snapshot id.
SELECT count(*) AS events, min(ts) AS first_ts, max(ts) AS last_ts
FROM events
