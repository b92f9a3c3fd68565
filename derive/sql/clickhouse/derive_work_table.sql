-- A table of a derivation, on disk: the rows of `query_rows`, the derivation query it is
-- made of (a query file over the work tables, or a kept answer; put in as a subquery by
-- derive/rename.py `inlined`). A build from nothing works over every event, so its
-- tables can be as large as the store's.
--
-- ClickHouse fills unmatched LEFT JOIN columns with type defaults and lets an alias
-- shadow a column of the same name unless told otherwise; the query library is written
-- for standard SQL's NULLs and name resolution (derive/library.py
-- CLICKHOUSE_SETTINGS).
CREATE OR REPLACE TABLE {table:Identifier} ENGINE = MergeTree ORDER BY tuple() AS
SELECT * FROM query_rows
SETTINGS join_use_nulls = 1, prefer_column_name_to_alias = 1,
    aggregate_functions_null_for_empty = 1
