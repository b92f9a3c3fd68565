-- Index entries of the files given, of the segments an index covers, as one index sorted
-- by lookup so that min/max statistics prune a key lookup to a few row groups (a day's
-- from its previous index and its new segments, the global one from every day's).
SELECT lookup, segment, row_group
FROM read_parquet($files)
WHERE list_contains($segments, segment)
ORDER BY lookup, segment, row_group
