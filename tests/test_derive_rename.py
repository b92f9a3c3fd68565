"""A query file read over other tables, or over another query, by sqlglot's tokens
(derive/rename.py): what a batch and a work table's DDL rely on."""

from __future__ import annotations

import duckdb

from derive.rename import inlined, renamed


def test_a_renamed_table_is_renamed_where_it_is_read_and_where_it_qualifies_a_column():
    sql = "SELECT runs.key FROM runs WHERE 'runs' <> runs.key -- runs\n"
    out = renamed(sql, "duckdb", {"runs": "work_runs"})
    assert out == "SELECT work_runs.key FROM work_runs WHERE 'runs' <> work_runs.key -- runs\n"


def test_an_inlined_relation_is_read_as_its_query():
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE holders AS SELECT * FROM (VALUES ('a'), ('c')) AS t(unit)")
        wrapper = "SELECT * FROM incidents WHERE uid IN (SELECT unit FROM holders) ORDER BY uid"
        query = "SELECT * FROM (VALUES ('a'), ('b'), ('c')) AS t(uid) -- every incident"
        rows = con.execute(inlined(wrapper, "duckdb", {"incidents": query})).fetchall()
    finally:
        con.close()
    assert rows == [("a",), ("c",)]


def test_a_column_or_string_spelling_an_inlined_relation_is_left_alone():
    wrapper = "SELECT answer, 'answer' AS label FROM answer"
    out = inlined(wrapper, "clickhouse", {"answer": "SELECT 1 AS answer"})
    assert out == "SELECT answer, 'answer' AS label FROM (SELECT 1 AS answer\n) AS answer"
