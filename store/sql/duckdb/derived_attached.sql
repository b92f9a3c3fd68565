-- Whether a derived table is a view over its file (attached, not yet held in memory).
SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = $name
