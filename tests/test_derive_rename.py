"""A query file read over other tables, or over another query, by its tokens
(derive/rename.py): what a batch and a work table's DDL rely on."""

from __future__ import annotations

from pathlib import Path

import duckdb

from derive.library import DERIVE_SQL_DIR, with_includes
from derive.rename import duckdb_tokens, inlined, renamed, renamed_by, sqlglot_tokens


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


def test_duckdb_s_tokens_rename_every_derivation_file_as_sqlglot_s_do():
    # The embedded store's text is split by DuckDB's tokenizer, ClickHouse's by sqlglot's:
    # over every DuckDB derivation file, with every relation a derivation swaps, both give
    # the same text.
    tables = {name: f"work_{name}" for name in (
        "derived_executions", "derived_outcomes", "derived_duplicate_runs", "layer_rows",
        "replaced_units", "holders", "lock_holders")}
    sources = {name: f"(SELECT 1) AS {name}" for name in (
        "unique_events", "events", "event_facts", "lock_incidents")}
    files = [*Path(DERIVE_SQL_DIR).glob("*.sql"), *Path(DERIVE_SQL_DIR, "duckdb").glob("*.sql")]
    assert len(files) > 30
    for path in files:
        sql = with_includes(path.read_text(), "duckdb")
        by_sqlglot = renamed_by(sql, sqlglot_tokens(sql, "duckdb"), tables, sources)
        assert renamed_by(sql, duckdb_tokens(sql), tables, sources) == by_sqlglot, path.name
