"""Derived tables and kept answers made on one DuckDB connection, from its `unique_events`.

A build from nothing runs this over every event; a batch (derive/embedded/incremental.py)
runs the same over the rows of the units it touches, on a connection of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from derive import answers, catalogue
from derive.embedded import state as derived_state
from derive.library import render, text
from derive.progress import BuildSteps
from store import memory

log = logging.getLogger("dupescope.queries")


def create_on(con: duckdb.DuckDBPyConnection, name: str, select: str,
              view: bool = False) -> None:
    """CREATE OR REPLACE a temp view or table on an embedded store's DuckDB connection."""
    started = time.perf_counter()
    derived_state.drop(con, name)
    con.execute(f"CREATE OR REPLACE TEMP {'VIEW' if view else 'TABLE'} {name} AS {select}")
    log.debug("derived %s in %.2f s", name, time.perf_counter() - started)


def retype_hugeints(con: duckdb.DuckDBPyConnection, name: str, kind: str) -> None:
    """Give a built table's HUGEINT columns a type Parquet keeps, so that a process that
    attaches the kept files reads what the building process reads (written as they are,
    they came back as DOUBLE: `side_effect_events` 0 in one process, 0.0 in the next).
    The derived tables' counts fit BIGINT; a kept answer keeps the Decimal its live
    query gives."""
    columns = text("hugeint_columns", "duckdb")
    wide = con.execute(render(columns, "duckdb", {"name": name}), {"name": name}).fetchall()
    for (column,) in wide:
        con.execute(f'ALTER TABLE {name} ALTER "{column}" TYPE {kind}')


def create_answer(con: duckdb.DuckDBPyConnection, name: str, select: str) -> None:
    """A kept answer as a table whose types survive Parquet: DuckDB writes a HUGEINT (what
    it sums integers into) as DOUBLE, so such columns are kept as DECIMAL(38, 0), which
    comes back as the same Decimal values a live query gives."""
    create_on(con, name, select)
    retype_hugeints(con, name, "DECIMAL(38, 0)")


@contextmanager
def within_budget(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """A full build's settings on `con`: no more threads than the budget holds (each
    needs its own buffers), and rows not kept in insertion order where no ORDER BY asks
    (which lets DuckDB stream a table to disk instead of holding it in order)."""
    con.execute(f"SET threads = {memory.build_threads()}")
    con.execute("SET preserve_insertion_order = false")
    try:
        yield
    finally:
        con.execute("RESET threads")
        con.execute("RESET preserve_insertion_order")


def build_tables(con: duckdb.DuckDBPyConnection, steps: BuildSteps | None = None) -> None:
    """event_facts and every chained derived table on `con`, over its `unique_events`
    (a build stage, a table without a unit, is dropped once the others are built).

    event_facts is held as a table, not a view: read as a view, its joins ran inside the
    ~40 aggregates of `derived_outcomes` and the statement could not spill (a build of
    560k events under 128 MB of DuckDB ran out of memory); held as a table, it spills to
    the temp directory and every table that reads it reads it once made."""
    if steps is not None:
        steps.begin("event_facts")
    create_on(con, "event_facts", text("event_facts", "duckdb"))
    for table in catalogue.chained("duckdb"):
        if steps is not None:
            steps.begin(table.name)
        create_on(con, table.name, text(table.file, "duckdb"))
        retype_hugeints(con, table.name, "BIGINT")
    for table in catalogue.TABLES:
        if table.unit is None:
            con.execute(f"DROP TABLE IF EXISTS {table.name}")
    con.execute("DROP TABLE IF EXISTS event_facts")


def layered_answers(con: duckdb.DuckDBPyConnection) -> None:
    """The kept answers kept in layers, over the derived tables on `con`."""
    for table in catalogue.by_key():
        name = table.removeprefix("answer_")
        create_answer(con, table, answers.select(name, "duckdb", counted=True))


def every_answer(con: duckdb.DuckDBPyConnection) -> None:
    """Every kept answer over the derived tables and segment counts on `con`."""
    answers.build("duckdb", lambda table, select: create_answer(con, table, select),
                  counted=True)


def exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether a table or view of that name is on `con`."""
    found = con.execute(render(text("relation_exists", "duckdb"), "duckdb", {"name": table}),
                        {"name": table}).fetchall()
    return bool(found[0][0])


def kept_order(table: catalogue.Table, built: bool) -> str:
    """The ORDER BY a kept table is written with (`built`: by a build, whose query may
    sort it already)."""
    if not table.order or (built and table.sorted_by_query):
        return ""
    return f" ORDER BY {table.order}"
