-- The hash of every lookup of every day index, for the global index's membership filter
-- (store/membership_filter.py hashes values with DuckDB's hash() alike).
SELECT hash(lookup) AS h
FROM read_parquet($files)
