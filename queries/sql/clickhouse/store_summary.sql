-- What the store holds in one cheap pass: how many events and the time span they cover.
-- ClickHouse spelling: each event once (FINAL), as repeats of an event_uid that no merge
-- has collapsed yet are no events of their own. Kept once per derived generation.
SELECT count(*) AS events, min(ts) AS first_ts, max(ts) AS last_ts
FROM events FINAL
