"""Derived relations the forensic queries read, built once per store snapshot.

A plain count over 10M raw events already takes most of a second, so every question that
must answer fast reads `derived_executions` (one row per execution) instead of `events`.
It is rebuilt only when the store's content changes: for the embedded store when its set
of Parquet segments changes (a temp table in the reader's DuckDB connection), for
ClickHouse and chDB when a cheap fingerprint of `events` changes (a table beside it).
`event_facts` stays a view: only the slower, rarer questions read events directly.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import pandas as pd

from queries.loader import placeholders, render, sql_text
from store.base import Store

_BUILT: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()

#: (table, query file) in build order: each reads the ones before it.
DERIVED_TABLES: tuple[tuple[str, str], ...] = (
    ("derived_executions", "derive_executions"),
    ("derived_lock_incidents", "derive_lock_incidents"),
)

# ClickHouse fills unmatched LEFT JOIN columns with type defaults and lets an alias shadow
# a column of the same name unless told otherwise; the query library is written for
# standard SQL's NULLs and name resolution.
_CLICKHOUSE_SETTINGS = (
    " SETTINGS join_use_nulls = 1, prefer_column_name_to_alias = 1,"
    " aggregate_functions_null_for_empty = 1"
)


def _lock_for(store: Store) -> threading.Lock:
    with _GUARD:
        lock = _LOCKS.get(store)
        if lock is None:
            lock = _LOCKS[store] = threading.Lock()
        return lock


def fingerprint(store: Store) -> str:
    """Changes whenever the events a store holds change (a cache key for derived data)."""
    snapshot = getattr(store, "snapshot_id", None)
    if snapshot is not None:
        return str(snapshot())
    row = store.execute(
        "SELECT count() AS n, toString(max(ts)) AS last, "
        "toString(sum(cityHash64(event_uid))) AS h FROM events"
    ).iloc[0]
    return f"{row['n']}:{row['last']}:{row['h']}"


def ensure(store: Store) -> None:
    """Build (or rebuild) the derived relations if the store changed since the last build."""
    with _lock_for(store):
        current = fingerprint(store)
        if _BUILT.get(store) == current:
            return
        _create(store, "event_facts", sql_text("event_facts", store.dialect), view=True)
        for table, name in DERIVED_TABLES:
            _create(store, table, sql_text(name, store.dialect), view=False)
        _BUILT[store] = current


def _create(store: Store, name: str, select: str, *, view: bool) -> None:
    """CREATE OR REPLACE a derived view or table from a query file (no parameters)."""
    if store.dialect == "duckdb":
        kind = "VIEW" if view else "TABLE"
        con = store.connection()  # type: ignore[attr-defined]
        con.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS {select}")
    elif view:
        store.command(f"CREATE OR REPLACE VIEW {name} AS {select}")  # type: ignore[attr-defined]
    else:
        store.command(  # type: ignore[attr-defined]
            f"CREATE OR REPLACE TABLE {name} ENGINE = MergeTree ORDER BY tuple() "
            f"AS {select}{_CLICKHOUSE_SETTINGS}"
        )


def query(store: Store, name: str, **params: Any) -> pd.DataFrame:
    """Run the named forensic query after making sure the derived relations are current."""
    ensure(store)
    text = sql_text(name, store.dialect)
    sql = render(text, store.dialect, params)
    if store.dialect == "clickhouse":
        sql += _CLICKHOUSE_SETTINGS
    used = placeholders(text)
    return store.execute(sql, {k: v for k, v in params.items() if k in used})
