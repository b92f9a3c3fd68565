-- What the query files of a derivation read as `unique_events` and `event_facts`: the
-- query of `query_rows` over the work tables (put in as a subquery by derive/rename.py
-- `inlined`), as a view, read again by each derived table that names it.
CREATE OR REPLACE VIEW {table:Identifier} AS
SELECT * FROM query_rows
