-- Columns of a table DuckDB typed HUGEINT (what it sums integers into), which Parquet
-- would keep only as DOUBLE.
SELECT column_name
FROM duckdb_columns()
WHERE table_name = :name AND data_type = 'HUGEINT'
