-- Changes when events arrive, cheap enough for `watch` to ask every interval (a store
-- without a snapshot id of its own: ClickHouse, chDB).
SELECT count() AS n, toString(max(ts)) AS last FROM events
