-- How many entries lookup_index_merge.sql writes: the size of the index's filter.
SELECT count(*)
FROM read_parquet($files)
WHERE list_contains($segments, segment)
