-- The hash of every lookup lookup_index_merge.sql writes, for the index's membership
-- filter (store/membership_filter.py hashes values with DuckDB's hash() alike).
SELECT hash(lookup) AS h
FROM read_parquet($files)
WHERE list_contains($segments, segment)
