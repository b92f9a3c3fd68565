-- duplicates_over_time with no filter set: the same buckets from the per-key table kept
-- with the derived tables (derive_key_runs.sql) instead of grouping every execution.
WITH per_key AS (SELECT * FROM derived_key_runs)
-- include: duplicate_buckets
