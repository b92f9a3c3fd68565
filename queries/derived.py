"""Questions over the derived tables, and the derive stage as the questions see it.

Every question that must answer fast reads the derived tables (one row per execution,
per lock incident, per run of a duplicated key, per job) instead of `events`; the derive
stage (derive/, docs/derived-tables.md) keeps them current batch by batch. This module
holds one deriver per store (derive/open.py), brings it up to date before a question runs,
reads kept answers where a question is asked as it is kept, and narrows questions to the
units a batch touched for `watch`.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa

from derive import catalogue
from derive.base import AnswerChanges, Deriver, Mark, Touched
from derive.library import CLICKHOUSE_SETTINGS
from derive.open import open_deriver
from derive.progress import BuildProgress, Builds
from derive.rename import renamed
from queries.duplicates_shape import shaped
from queries.json_lines import json_lines
from queries.loader import placeholders, render, sql_text
from store.base import Store, to_frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AnswerChanges", "BUILT_TABLES", "BuildProgress", "KEPT_TABLES", "Mark", "Touched",
           "answer_changes", "answer_of_keys", "builds", "deriver", "ensure", "following_builds",
           "narrowed", "only", "query", "query_arrow",
           "query_live", "reads_events",
           "rebuild", "table", "tables", "touched_since", "write_duplicates_listing"]

log = logging.getLogger("dupescope.queries")

#: The deriver of each store this process asks.
_DERIVERS: weakref.WeakKeyDictionary[Store, Deriver] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()

#: What the questions read; the build stages are dropped once the build is done.
KEPT_TABLES: tuple[str, ...] = tuple(
    t.name for t in catalogue.TABLES if t.unit is not None and t.chained)

#: Everything a build leaves: the derived tables and the answers kept with them.
BUILT_TABLES: tuple[str, ...] = KEPT_TABLES + catalogue.answer_tables()


def _rendered_duplicates(rows: pa.Table) -> Iterator[bytes]:
    """Rows of the kept duplicates answer as `dupescope duplicates --format json` prints
    them: what a deriver keeps rendered beside its state (`write_duplicates_listing`)."""
    return json_lines(shaped(rows))


def deriver(store: Store) -> Deriver:
    """The deriver of `store` in this process (one a store, made when first asked)."""
    with _GUARD:
        found = _DERIVERS.get(store)
        if found is None:
            found = _DERIVERS[store] = open_deriver(store, _rendered_duplicates)
        return found


def ensure(store: Store) -> None:
    """Build (or rebuild) the derived relations if the store changed since the last build."""
    deriver(store).ensure()


def builds(store: Store) -> Builds:
    """Where a build of `store`'s derived tables from nothing stands, step by step: minutes
    on a large ClickHouse store (derive/progress.py). A process that shows every build
    follows it here."""
    return deriver(store).builds


@contextmanager
def following_builds(store: Store, listener: Callable[[BuildProgress], None]) -> Iterator[None]:
    """Tell `listener` each step of a build from nothing that runs within the block (a
    page that shows the build it waits for)."""
    told = builds(store)
    told.follow(listener)
    try:
        yield
    finally:
        told.unfollow(listener)


def rebuild(store: Store) -> None:
    """Build the derived relations from nothing, whatever was built or kept before.

    What a first load does, and the repair for a kept build that is suspect (a file
    damaged on disk, an upgrade that changed a query): `dupescope rebuild`. On an embedded
    store the segments' repeat checks are made again too, and the new build replaces the
    kept files (each renamed into place, so a reader sees the old file or the new one).
    """
    deriver(store).rebuild()


def write_duplicates_listing(store: Store, out: BinaryIO) -> bool:
    """Print every duplicate as one JSON array from the rendering kept with the current
    derived state (an embedded store's); False (nothing printed) where none is kept."""
    return deriver(store).write_listing(out)


def table(store: Store, name: str) -> pa.Table:
    """A derived table or kept answer (`BUILT_TABLES`) of the current state, as it is
    kept (a kept answer computed if it was not yet)."""
    return tables(store, [name])[name]


def tables(store: Store, names: Iterable[str] = BUILT_TABLES) -> dict[str, pa.Table]:
    """Derived tables and kept answers of the current state, as they are kept: the state
    is brought up to date once for all of them (on chDB a look at the status costs a few
    statements, 25 ms, and comparing a whole state reads 34 tables)."""
    return deriver(store).tables(names)


def query(store: Store, name: str, **params: Any) -> pd.DataFrame:
    """Run the named forensic query after making sure the derived relations are current."""
    return to_frame(query_arrow(store, name, **params))


def query_arrow(store: Store, name: str, **params: Any) -> pa.Table:
    """`query` as Arrow: list columns stay cheap to turn into Python lists."""
    ensure(store)
    narrowed = id(store) in _ONLY.get()
    kept = None if narrowed else catalogue.table_for(name, params)
    if kept is not None:
        return deriver(store).answer(kept)
    return _asked(store, name, params, narrowed)


def query_live(store: Store, name: str, **params: Any) -> pa.Table:
    """`query_arrow` run over the derived tables even where its answer is kept: what a
    kept answer is held equal to."""
    ensure(store)
    return _asked(store, name, params, id(store) in _ONLY.get())


def _asked(store: Store, name: str, params: dict[str, Any], narrowed: bool) -> pa.Table:
    text = sql_text(name, store.dialect)
    if narrowed:
        text = renamed(text, store.dialect, {t: f"only_{t}" for t in _NARROWED})
    sql = render(text, store.dialect, params)
    if store.dialect == "clickhouse":
        sql += CLICKHOUSE_SETTINGS
    used = placeholders(text)
    bound = {k: v for k, v in params.items() if k in used}
    segmented = store.segmented()
    if segmented is not None:
        return segmented.arrow(sql, bound, events=reads_events(text))
    return store.arrow(sql, bound)


#: The views over the segments' rows; comments, where a query may name them in passing.
_EVENT_VIEWS = re.compile(r"\b(?:events|unique_events|event_facts)\b")
_COMMENTS = re.compile(r"--[^\n]*")


def reads_events(sql: str) -> bool:
    """Whether `sql` reads the segments' rows. One that reads derived tables alone need
    not bind the embedded `events` view, which reads every segment's footer: 0.7 s of a
    filtered listing at 100M events. A word that only looks like a view binds it anyway."""
    return _EVENT_VIEWS.search(_COMMENTS.sub("", sql)) is not None


def touched_since(store: Store, since: Mark | None) -> tuple[Mark | None, Touched | None]:
    """Where the derived state is now, and what changed since `since`: None for "anything
    may have" (no mark yet, a build from nothing since, a read-only embedded store)."""
    return deriver(store).touched_since(since)


def answer_changes(store: Store, table: str, since: Mark | None) -> AnswerChanges:
    """What kept answer `table` (one of one key a row) changed since `since`: a reader
    that holds the answer as of `since` brings it up to date at the cost of the batches
    since, where reading it whole costs every duplicate the store holds."""
    if table not in catalogue.by_key():
        raise ValueError(f"{table} is not kept one key a row")
    return deriver(store).answer_changes(table, since)


def answer_of_keys(store: Store, table: str, keys: list[str]) -> pa.Table:
    """The rows kept answer `table` (one of one key a row) holds for `keys`: one key's
    row without reading every duplicate the store holds."""
    if table not in catalogue.by_key():
        raise ValueError(f"{table} is not kept one key a row")
    return deriver(store).answer_of_keys(table, keys)


def narrowed(store: Store) -> bool:
    """Whether this thread or task asks `store` of touched units only (`only`)."""
    return id(store) in _ONLY.get()


#: The stores (by id) whose questions this thread or task asks of touched units only.
_ONLY: ContextVar[frozenset[int]] = ContextVar("dupescope_only", default=frozenset())
#: The tables a narrowed question reads as `only_<table>`.
_NARROWED = ("derived_executions", "derived_lock_incidents", "derived_duplicate_runs")


@contextmanager
def only(store: Store, touched: Touched) -> Iterator[None]:
    """Questions asked of `store` meanwhile (by this thread or task) see the rows of
    `touched` units alone, as asked live: the executions of its keys and every holder of
    a lock_key they held, their lock incidents, and the duplicate runs of its keys. Per-
    key and per-lock_key questions (duplicates, lock overruns, split brains, stale owner
    writes) then answer for what changed, at the cost of what changed."""
    deriver(store).narrow(touched)
    token = _ONLY.set(_ONLY.get() | {id(store)})
    try:
        yield
    finally:
        _ONLY.reset(token)
