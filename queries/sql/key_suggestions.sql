-- Keys whose idempotency key, job_id, resource key, lock owner or lock key starts with
-- :prefix, for the timeline's search box (see derive_lookup.sql for `key`). Newest first,
-- so an on-call search finds the live incident. `prefix_end` is the least string above
-- every string that starts with the prefix: the range lets the scan skip all row groups
-- but the few that hold the prefix.
-- param prefix: String
-- param prefix_end: String
-- param limit: Int64
SELECT kind, value, key, events, last_ts
FROM derived_lookup
WHERE value >= :prefix
  AND value < :prefix_end
  AND left(value, length(:prefix)) = :prefix
ORDER BY last_ts DESC, kind, value
LIMIT :limit
