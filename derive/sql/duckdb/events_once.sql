-- The rows of `rows` with one row per event_uid: the same event found by two lookups of
-- a batch's touched jobs, or a batch resent, is derived from once.
SELECT DISTINCT ON (event_uid) *
FROM {rows:Identifier}
