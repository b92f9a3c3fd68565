-- Every day's key index as one, sorted by lookup so that min/max statistics prune a
-- key lookup to a few row groups.
SELECT lookup, segment, row_group
FROM read_parquet($files)
ORDER BY lookup, segment, row_group
