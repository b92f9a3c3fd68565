-- Whether a temp table or view of that name exists on the reader's connection.
SELECT
    (SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = :name)
    + (SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = :name) AS found
