"""Every statement dupescope issues `ON CLUSTER`, parsed by sqlglot in the ClickHouse
dialect and run on chDB without the cluster clause.

No cluster can be reached here: chDB has no Keeper (so Replicated engines run as their
plain form) and no clusters (so a Distributed front runs as a Merge table over its local
table, which checks its shape; its sharding arguments are checked by the parse). What is
left is every statement's own text, run by the ClickHouse engine.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest
import sqlglot
from chdb import session
from sqlglot import exp

from derive.clickhouse import kept as clickhouse_derived
from store.clickhouse import events_ddl, ids_ddl, ids_fill_statements, upgrade_statements

CLUSTER = "prod"
DB = "dupescope"


class Recorder:
    """A store that keeps the statements it is given (the derived tables' DDL)."""

    database = DB
    cluster = CLUSTER

    def __init__(self) -> None:
        self.statements: list[str] = []

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.statements.append(sql)

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        return pa.table({"name": ["present"]})  # every table asked about is there


def _derived() -> list[str]:
    recorder = Recorder()
    store: Any = recorder
    clickhouse_derived.create_bookkeeping(store)
    clickhouse_derived.create_rows_table(store, "derived_executions_rows",
                                         [("key", "Nullable(String)"),
                                          ("lock_key", "Nullable(String)")], "key",
                                         "lock_key")
    clickhouse_derived.create_view(store, "derived_executions")
    clickhouse_derived.create_rows_table(store, "derived_executions_rows_next",
                                         [("key", "Nullable(String)"),
                                          ("lock_key", "Nullable(String)")], "key")
    clickhouse_derived.add_lookup(store, "derived_executions_rows_next", "key", "lock_key")
    clickhouse_derived.replace_table(store, "derived_executions_rows",
                                     "derived_executions_rows_next")
    clickhouse_derived.drop_table(store, "derived_executions_rows")
    return recorder.statements


def statements() -> list[str]:
    """The statements a cluster's store issues to make its tables, in order (all but the
    id index's fill, an INSERT through the Distributed front, are ON CLUSTER)."""
    return (events_ddl(DB, ttl_days=30, cluster=CLUSTER)
            + ids_ddl(DB, ttl_days=30, cluster=CLUSTER)
            + ids_fill_statements(DB, cluster=CLUSTER)
            + upgrade_statements(DB, cluster=CLUSTER)
            + _derived())


def local(statement: str) -> str:
    """The statement as one node runs it: no cluster clause, no Keeper, no cluster."""
    text = re.sub(rf"\s+ON CLUSTER\s+{CLUSTER}\b", "", statement)
    text = re.sub(r"\bReplicated(\w*MergeTree)\('[^']*',\s*'[^']*'(,\s*)?", r"\1(", text)
    text = re.sub(r"\b(\w*MergeTree)\(\)", r"\1", text)
    return re.sub(r"ENGINE = Distributed\([^,]+,\s*(\w+),\s*(\w+),.*\)$",
                  r"ENGINE = Merge(\1, '^\2$')", text, flags=re.M)


@pytest.mark.parametrize("statement", [s for s in statements() if "ON CLUSTER" in s],
                         ids=lambda s: s.split("\n")[0][:70])
def test_every_cluster_statement_parses_in_the_clickhouse_dialect(statement: str) -> None:
    tree = sqlglot.parse_one(statement, read="clickhouse")
    assert isinstance(tree, exp.Create | exp.Alter | exp.Insert | exp.Drop | exp.Command)


def test_every_cluster_statement_runs_on_chdb_without_the_cluster_clause(tmp_path) -> None:
    s = session.Session(str(tmp_path))
    try:
        for statement in (s for s in statements() if "ON CLUSTER" in s):
            text = local(statement)
            assert "ON CLUSTER" not in text and "Replicated" not in text
            try:
                s.query(text)
            except Exception as exc:  # chDB raises its own error types
                pytest.fail(f"{exc}\nin:\n{text}")
        tables = s.query(f"SELECT name FROM system.tables WHERE database = '{DB}' "
                         "ORDER BY name", "CSV").bytes().decode()
    finally:
        s.close()
    for name in ("events_local", "events", "events_ids_local", "events_ids",
                 "events_ids_mv", "derived_status"):
        assert f'"{name}"' in tables
