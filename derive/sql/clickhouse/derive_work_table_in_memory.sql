-- A work table of a batch, in memory: the rows of `query_rows`, the derivation query it
-- is made of (put in as a subquery by derive/rename.py `inlined`). A batch's work tables
-- hold its units' rows, and kept in memory they spare each of its hundred statements
-- the writing of a part. The settings are derive_work_table.sql's.
CREATE OR REPLACE TABLE {table:Identifier} ENGINE = Memory AS
SELECT * FROM query_rows
SETTINGS join_use_nulls = 1, prefer_column_name_to_alias = 1,
    aggregate_functions_null_for_empty = 1
