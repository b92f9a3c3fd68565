"""Derived relations the forensic queries read, kept current as events arrive.

A plain count over 10M raw events already takes most of a second, so every question that
must answer fast reads the derived tables (one row per execution, per lock incident, per
run of a duplicated key, per job) instead of `events`. They are built from nothing once,
then kept current by deriving again only the units (keys, jobs, executions) that new rows
touch:

- on the embedded store, as layers of Parquet files under `<store>/derived/`, found by
  what the segments gained since (store/derived_state.py, queries/incremental.py), so a
  one-shot CLI process and the dashboard reuse one state instead of each paying for it;
- on ClickHouse and chDB, as rows versioned by unit in tables beside `events`, found by
  when the rows were inserted (store/clickhouse_derived.py,
  queries/incremental_clickhouse.py).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import duckdb
import pyarrow as pa

from queries import answers, duplicates_listing, incremental, incremental_clickhouse
from queries.loader import placeholders, render, sql_text
from store import clickhouse_derived, derived_state, materialised
from store.base import SegmentedStore, Store, to_frame
from store.clickhouse import ClickHouseEngine
from store.lineage import Changes, commits
from store.lookup_index import segment_name
from store.sql_files import with_identifiers

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("dupescope.queries")

_BUILT: weakref.WeakKeyDictionary[Store, str] = weakref.WeakKeyDictionary()
_STATES: weakref.WeakKeyDictionary[Store, derived_state.State] = weakref.WeakKeyDictionary()
_STATUSES: weakref.WeakKeyDictionary[Store, clickhouse_derived.Status] = (
    weakref.WeakKeyDictionary())
_LOCKS: weakref.WeakKeyDictionary[Store, threading.Lock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()

#: (table, query file) in build order: each reads the ones before it.
DERIVED_TABLES: tuple[tuple[str, str], ...] = (
    ("derived_outcomes", "derive_execution_outcomes"),
    ("derived_executions", "derive_executions"),
    ("derived_lock_incidents", "derive_lock_incidents"),
    ("derived_duplicate_runs", "derive_duplicate_runs"),
    ("derived_jobs", "derive_jobs"),
    ("derived_lifecycle", "derive_lifecycle"),
    ("derived_key_runs", "derive_key_runs"),
    ("derived_lookup", "derive_lookup"),
    ("derived_redeliveries", "derive_redeliveries"),
)

#: What the questions read; the rest are build stages, dropped once the build is done.
KEPT_TABLES: tuple[str, ...] = tuple(t for t, _ in DERIVED_TABLES if t != "derived_outcomes")

#: Everything a build leaves: the derived tables and the answers kept with them.
BUILT_TABLES: tuple[str, ...] = KEPT_TABLES + answers.TABLES

def _lock_for(store: Store) -> threading.Lock:
    with _GUARD:
        lock = _LOCKS.get(store)
        if lock is None:
            lock = _LOCKS[store] = threading.Lock()
        return lock


def ensure(store: Store) -> None:
    """Build (or rebuild) the derived relations if the store changed since the last build."""
    with _lock_for(store):
        segmented = store.segmented()
        if segmented is not None:
            _ensure_embedded(segmented)
            return
        store.snapshot_id()  # a store over the exporter's tables refreshes `events`
        _STATUSES[store] = incremental_clickhouse.ensure(_engine(store), DERIVED_TABLES)


def _engine(store: Store) -> ClickHouseEngine:
    """A store without segments: ClickHouse or chDB, which keep their derived tables."""
    if not isinstance(store, ClickHouseEngine):
        raise TypeError(f"{store.describe()} has no segments and is no ClickHouse store")
    return store


def rebuild(store: Store) -> None:
    """Build the derived relations from nothing, whatever was built or kept before.

    What a first load does, and the repair for a kept build that is suspect (a file
    damaged on disk, an upgrade that changed a query): `dupescope rebuild`. On an embedded
    store the segments' repeat checks are made again too, and the new build replaces the
    kept files (each renamed into place, so a reader sees the old file or the new one).
    """
    with _lock_for(store):
        _BUILT.pop(store, None)
        segmented = store.segmented()
        if segmented is None:
            store.snapshot_id()
            _STATUSES[store] = incremental_clickhouse.rebuild(_engine(store), DERIVED_TABLES)
            return
        materialised.forget_checks(segmented)
        read = _read_now(segmented)
        con, current = segmented.pinned_connection()
        if not derived_state.writable(segmented):
            _build_in_memory(segmented, con)
        else:
            with derived_state.exclusive(segmented):
                state = _build_base(segmented, con, current, read)
                derived_state.commit(segmented, state)
                if not _attach(segmented, con, state):
                    raise FileNotFoundError("a derived state just written is incomplete")
                derived_state.remove_stale(segmented, state)
        _BUILT[store] = current


def _ensure_embedded(store: SegmentedStore) -> None:
    """Current derived tables on an embedded store: attach the kept state if it is
    current, else derive what changed since it (or build from nothing) and keep that."""
    for attempt in range(2):
        read = _read_now(store)
        # A kept state current or a batch to absorb reads no `events` (the build does).
        con, current = store.pinned_connection(events=False)
        if _BUILT.get(store) == current:
            return
        try:
            if not derived_state.writable(store):
                con, current = store.pinned_connection()
                _build_in_memory(store, con)
            else:
                current = _derive_and_keep(store, con, current, read)
        except (duckdb.IOException, FileNotFoundError):
            # A segment listed a moment ago was compacted away: list again, once.
            store.forget_snapshot()
            if attempt:
                raise
            continue
        _BUILT[store] = current
        return


def _read_now(store: SegmentedStore) -> dict[str, int]:
    """The segments and log frames there are now (listed before the reader's snapshot
    is pinned, so that the snapshot holds at least these)."""
    return {segment_name(p): commits(p) for p in store.segments()}


def _derive_and_keep(
    store: SegmentedStore, con: duckdb.DuckDBPyConnection, current: str, read: dict[str, int]
) -> str:
    """Attach the kept state of snapshot `current`, or derive and keep it; returns the
    snapshot the attached state is of (a build pins the segments again, with `events`)."""
    state = derived_state.load(store)
    if state is not None and state.snapshot == current and _attach(store, con, state):
        return current
    with derived_state.exclusive(store):
        state = derived_state.load(store)  # another process may have made it meanwhile
        if state is not None and state.snapshot == current and _attach(store, con, state):
            return current
        changes = None
        if state is not None and _attach(store, con, state):
            changes = store.changes_since(state.read)
        if state is None or changes is None or _too_large(changes, state):
            con, current = store.pinned_connection()
            state = _build_base(store, con, current, read)
        else:
            state = _absorb(store, con, state, changes, current)
        derived_state.commit(store, state)
        if not _attach(store, con, state):
            raise FileNotFoundError("a derived state just written is incomplete")
        # The batch is kept and readable: now fold or merge layers if they are due.
        compacted = _compacted(store, con, state)
        if compacted is not state:
            derived_state.commit(store, compacted)
            if not _attach(store, con, compacted):
                raise FileNotFoundError("a derived state just written is incomplete")
        derived_state.remove_stale(store, compacted)
    return current


#: A batch of more rows than this, and larger than the store's executions twice over, is
#: derived by a build from nothing: fetching the history of most keys one lookup at a
#: time costs more than reading everything once (a file ingested into a young store).
LARGE_BATCH_ROWS = 500_000


def _too_large(changes: Changes, state: derived_state.State) -> bool:
    rows = sum(int(t.num_rows) for t in [*changes.added, *changes.removed])
    executions = sum(state.sizes.get("derived_executions", []))
    return rows > LARGE_BATCH_ROWS and rows > 2 * executions


def _attach(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
            state: derived_state.State) -> bool:
    lazy = tuple(t for t in answers.TABLES if t not in answers.LAYERED)
    if not derived_state.attach(store, con, state, _LAYERED, answers.LAYERED, lazy):
        return False
    _STATES[store] = state
    return True


#: Everything kept in layers: the derived tables and the kept answers of one key a row.
_LAYERED: dict[str, str | None] = {**incremental.UNITS,
                                   **{t: "key" for t in answers.LAYERED}}


def _absorb(
    store: SegmentedStore,
    con: duckdb.DuckDBPyConnection,
    state: derived_state.State,
    changes: Changes,
    current: str,
) -> derived_state.State:
    """A new state: `state` and a layer of what `changes` touch, its answers again."""
    started = time.perf_counter()
    layer = derived_state.new_id()
    sizes = incremental.derive(store, con, changes, layer, _create_on, _build_tables,
                               _layered_answers)
    _keep_listing(store, layer)
    grown = derived_state.State(
        snapshot=current,
        read=changes.read,
        layers=[*state.layers, layer],
        answers=derived_state.new_id(),  # computed when first asked for (_kept_answer)
        sizes={t: [*state.sizes.get(t, []), n] for t, n in sizes.items()},
        epoch=state.epoch,
        generation=state.generation + 1,
        journal=[*state.journal, layer][-derived_state.JOURNAL:],
    )
    if not _attach(store, con, grown):
        raise FileNotFoundError("a derived layer just written is incomplete")
    log.debug("absorbed %d new rows in %.2f s", changes.rows().num_rows,
              time.perf_counter() - started)
    return grown


def _compacted(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
               state: derived_state.State) -> derived_state.State:
    """`state` with its layers merged into a new base or its newest folded, where due
    (store/derived_state.py); `state` itself where neither is."""
    if derived_state.should_merge(state):
        return _merge_layers(store, con, state)
    span = derived_state.fold_span(state)
    return _fold_layers(store, con, state, span) if span else state


def _fold_layers(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
                 state: derived_state.State, span: int) -> derived_state.State:
    """The newest `span` layers folded into one: their rows now, and every unit any of
    them replaces (so the older layers' rows of those units stay hidden)."""
    started = time.perf_counter()
    folded = state.layers[-span:]
    layer = derived_state.new_id()
    sizes = {}
    for table, unit in _LAYERED.items():
        rows = derived_state.layered_select(store, table, unit, folded)
        sizes[table] = [*state.sizes.get(table, [])[:-span], derived_state.write(
            con, f"SELECT * FROM ({rows}){_ORDER.get(table, '')}",
            derived_state.rows_path(store, table, layer))]
        if unit is not None:
            derived_state.write(con, derived_state.units_select(store, table, folded),
                                derived_state.units_path(store, table, layer))
    _keep_listing(store, layer)
    log.debug("folded %d layers in %.2f s", span, time.perf_counter() - started)
    return derived_state.State(state.snapshot, state.read, [*state.layers[:-span], layer],
                               state.answers, sizes, state.epoch, state.generation,
                               state.journal)


def _merge_layers(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
                  state: derived_state.State) -> derived_state.State:
    """Fold every layer into a new base (each table written in its build's order)."""
    layer = derived_state.new_id()
    sizes = {}
    for table in _LAYERED:
        order = _ORDER.get(table, "")
        sizes[table] = [derived_state.write(
            con, f"SELECT * FROM {table}{order}", derived_state.rows_path(store, table, layer))]
    _keep_listing(store, layer)
    return derived_state.State(state.snapshot, state.read, [layer], state.answers, sizes,
                               state.epoch, state.generation, state.journal)


#: The order a table is written in by a build and kept when layers are merged or folded:
#: min/max statistics then narrow a prefix search to a row group or two, and a search
#: for the lock holders a batch reaches to the newest row groups of the executions
#: (kept_lock_holders.sql).
_ORDER = {
    "derived_lookup": " ORDER BY value, kind, key",
    "derived_duplicate_runs": " ORDER BY key, start_us",
    "derived_executions": " ORDER BY end_us",
}
#: The tables whose query files already sort them (a build does not sort them again).
_SORTED_BY_QUERY = frozenset({"derived_lookup", "derived_duplicate_runs"})


def _build_tables(con: duckdb.DuckDBPyConnection) -> None:
    """event_facts and every derived table on `con`, over its `unique_events`."""
    _create_on(con, "event_facts", sql_text("event_facts", "duckdb"), view=True)
    for table, name in DERIVED_TABLES:
        _create_on(con, table, sql_text(name, "duckdb"))
        _retype_hugeints(con, table, "BIGINT")
    con.execute("DROP TABLE IF EXISTS derived_outcomes")


def _build_in_memory(
    store: SegmentedStore, con: duckdb.DuckDBPyConnection, every_answer: bool = True
) -> None:
    """Everything built on the reader's connection (`every_answer`: every kept answer, as
    a read-only store needs; else only those kept in layers)."""
    deduplicated = materialised.unique_events(store, con)
    # Held once, where DuckDB can spill it, when repeats are dropped: a view would drop
    # them again for every table that reads it.
    held = "VIEW" if deduplicated == "SELECT * FROM events" else "TABLE"
    kind = con.execute(
        "SELECT 'VIEW' FROM duckdb_views() WHERE view_name = 'unique_events' AND temporary "
        "UNION ALL SELECT 'TABLE' FROM duckdb_tables() WHERE table_name = 'unique_events' "
        "AND temporary"
    ).fetchall()
    for (existing,) in kind:  # a view or a table from an earlier build on this connection
        con.execute(f"DROP {existing} unique_events")
    con.execute(f"CREATE TEMP {held} unique_events AS {deduplicated}")
    _build_tables(con)
    incremental.count_segments(con, store.segments(), _create_on)
    if every_answer:
        answers.build(store, lambda table, select: _create_answer(con, table, select),
                      counted=True)
    else:
        _layered_answers(con)


def _layered_answers(con: duckdb.DuckDBPyConnection) -> None:
    """The kept answers kept in layers, over the derived tables on `con`."""
    for table in answers.LAYERED:
        name = table.removeprefix("answer_")
        _create_answer(con, table, answers.select(name, "duckdb", counted=True))


def _build_base(
    store: SegmentedStore, con: duckdb.DuckDBPyConnection, snapshot: str, read: dict[str, int]
) -> derived_state.State:
    """Everything from nothing, kept as a base layer (the other kept answers are computed
    when first asked for)."""
    started = time.perf_counter()
    _build_in_memory(store, con, every_answer=False)
    log.debug("derived tables built in %.2f s", time.perf_counter() - started)
    layer = derived_state.new_id()
    sizes = {}
    for table in _LAYERED:
        order = "" if table in _SORTED_BY_QUERY else _ORDER.get(table, "")
        written = time.perf_counter()
        sizes[table] = [derived_state.write(
            con, f"SELECT * FROM {table}{order}", derived_state.rows_path(store, table, layer))]
        log.debug("kept %s in %.2f s", table, time.perf_counter() - written)
    _keep_listing(store, layer)
    return derived_state.State(snapshot, read, [layer], derived_state.new_id(), sizes,
                               epoch=layer)


def _keep_listing(store: SegmentedStore, layer: str) -> None:
    """The layer's duplicates rendered as the command line prints them
    (queries/duplicates_listing.py)."""
    started = time.perf_counter()
    duplicates_listing.keep_layer(store, layer)
    log.debug("kept the duplicates listing in %.2f s", time.perf_counter() - started)


def _create_answer(con: duckdb.DuckDBPyConnection, name: str, select: str) -> None:
    """A kept answer as a table whose types survive Parquet: DuckDB writes a HUGEINT (what
    it sums integers into) as DOUBLE, so such columns are kept as DECIMAL(38, 0), which
    comes back as the same Decimal values a live query gives."""
    _create_on(con, name, select)
    _retype_hugeints(con, name, "DECIMAL(38, 0)")


def _retype_hugeints(con: duckdb.DuckDBPyConnection, name: str, kind: str) -> None:
    """Give a built table's HUGEINT columns a type Parquet keeps, so that a process that
    attaches the kept files reads what the building process reads (written as they are,
    they came back as DOUBLE: `side_effect_events` 0 in one process, 0.0 in the next).
    The derived tables' counts fit BIGINT; a kept answer keeps the Decimal its live
    query gives."""
    columns = sql_text("hugeint_columns", "duckdb")
    wide = con.execute(render(columns, "duckdb", {"name": name}), {"name": name}).fetchall()
    for (column,) in wide:
        con.execute(f'ALTER TABLE {name} ALTER "{column}" TYPE {kind}')


def _create_on(
    con: duckdb.DuckDBPyConnection, name: str, select: str, view: bool = False
) -> None:
    """CREATE OR REPLACE a temp view or table on an embedded store's DuckDB connection."""
    started = time.perf_counter()
    derived_state.drop(con, name)
    con.execute(f"CREATE OR REPLACE TEMP {'VIEW' if view else 'TABLE'} {name} AS {select}")
    log.debug("derived %s in %.2f s", name, time.perf_counter() - started)


def _kept_answer(store: Store, table: str) -> pa.Table:
    segmented = store.segmented()
    sql = answers.read_sql(table, store.dialect)
    with _lock_for(store):
        if segmented is not None:
            layered = table in answers.LAYERED
            con = segmented.connection(events=not layered)
            if layered and _exists(con, f"{table}_layers"):
                # Read once in its order from the layers: numbering them first sorted
                # them twice (0.7 s more for the 600k duplicates of 100M events).
                sql = f"SELECT * FROM {table}_layers ORDER BY {answers.LAYERED[table]}"
            else:
                if not _exists(con, table):
                    _compute_answer(segmented, con, table)
                materialised.hold(con, table)
        else:
            incremental_clickhouse.answer(_engine(store), table, _STATUSES[store])
    read = store.arrow(sql) if segmented is None else segmented.arrow(sql, events=False)
    return read.drop_columns(["answer_row"])


def write_duplicates_listing(store: Store, out: BinaryIO) -> bool:
    """Print every duplicate from the listing kept with the current derived state (an
    embedded store's: queries/duplicates_listing.py); False (nothing printed) where no
    such listing is kept."""
    segmented = store.segmented()
    if segmented is None:
        return False
    ensure(store)
    with _lock_for(store):
        state = _STATES.get(store) if _BUILT.get(store) is not None else None
    return state is not None and duplicates_listing.write(segmented, state, out)


def _exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    found = con.execute(render(sql_text("relation_exists", "duckdb"), "duckdb", {"name": table}),
                        {"name": table}).fetchall()
    return bool(found[0][0])


def _compute_answer(store: SegmentedStore, con: duckdb.DuckDBPyConnection, table: str) -> None:
    """A kept answer first asked for in this state: computed from the derived tables and
    kept beside them, so the next process reads it."""
    started = time.perf_counter()
    name = table.removeprefix("answer_")
    _create_answer(con, table, answers.select(name, "duckdb", counted=True))
    state = _STATES.get(store)
    if state is not None:
        derived_state.keep(con, table, store, state)
    log.debug("kept answer %s computed in %.2f s", table, time.perf_counter() - started)


def table(store: Store, name: str) -> pa.Table:
    """A derived table or kept answer (`BUILT_TABLES`) of the current state, as it is
    kept (a kept answer computed if it was not yet)."""
    return tables(store, [name])[name]


def tables(store: Store, names: Iterable[str] = BUILT_TABLES) -> dict[str, pa.Table]:
    """Derived tables and kept answers of the current state, as they are kept: the state
    is brought up to date once for all of them (on chDB a look at the status costs a few
    statements, 25 ms, and comparing a whole state reads 34 tables)."""
    ensure(store)
    read = {}
    for name in names:
        if name in answers.TABLES:
            _kept_answer(store, name)
        read[name] = store.arrow(with_identifiers(sql_text("kept_table", store.dialect),
                                                  table=name))
    return read


def query(store: Store, name: str, **params: Any) -> pd.DataFrame:
    """Run the named forensic query after making sure the derived relations are current."""
    return to_frame(query_arrow(store, name, **params))


def query_arrow(store: Store, name: str, **params: Any) -> pa.Table:
    """`query` as Arrow: list columns stay cheap to turn into Python lists."""
    ensure(store)
    narrowed = id(store) in _ONLY.get()
    kept = None if narrowed else answers.table_for(name, params)
    if kept is not None:
        return _kept_answer(store, kept)
    text = sql_text(name, store.dialect)
    if narrowed:
        text = _NARROWED.sub(r"only_derived_\1", text)
    sql = render(text, store.dialect, params)
    if store.dialect == "clickhouse":
        sql += incremental_clickhouse.SETTINGS
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


@dataclass(frozen=True)
class Mark:
    """A point in a store's derived history: an epoch (a build from nothing) and a
    generation in it (one per batch derived); on ClickHouse also the row version the
    generation wrote under."""

    epoch: str
    generation: int
    version: int = 0


@dataclass(frozen=True)
class Touched:
    """What batches changed: keys whose executions were derived again, and executions
    whose lock incidents were (every holder of a lock_key such a key's runs held)."""

    keys: frozenset[str]
    executions: frozenset[str]


def touched_since(store: Store, since: Mark | None) -> tuple[Mark | None, Touched | None]:
    """Where the derived state is now, and what changed since `since`: None for "anything
    may have" (no mark yet, a build from nothing since, a read-only embedded store)."""
    ensure(store)
    segmented = store.segmented()
    if segmented is None:
        return _touched_since_clickhouse(store, since)
    state = _STATES.get(store)
    if state is None:
        return None, None
    now = Mark(state.epoch, state.generation)
    if since is None:
        return now, None
    units = derived_state.touched_since(
        segmented, state, since.epoch, since.generation,
        {"derived_executions": "key", "derived_lock_incidents": "execution_uid"})
    if units is None:
        return now, None
    return now, Touched(frozenset(units["derived_executions"]),
                        frozenset(units["derived_lock_incidents"]))


def _touched_since_clickhouse(store: Store,
                              since: Mark | None) -> tuple[Mark | None, Touched | None]:
    status = _STATUSES.get(store)
    if status is None:
        return None, None
    now = Mark(status.epoch, status.generation, status.version)
    if since is None or since.epoch != status.epoch:
        return now, None
    keys, executions = incremental_clickhouse.touched_since(_engine(store), since.version)
    return now, Touched(frozenset(keys), frozenset(executions))


@dataclass(frozen=True)
class AnswerChanges:
    """Where a kept answer of one key a row stands (`mark`), and what changed in it since
    an earlier mark: the keys whose rows were replaced, with their rows now (a key
    without a row has none any more). `keys` None: anything may have changed."""

    mark: Mark | None
    keys: frozenset[str] | None = None
    rows: pa.Table | None = None


def answer_changes(store: Store, table: str, since: Mark | None) -> AnswerChanges:
    """What kept answer `table` (one of `answers.LAYERED`) changed since `since`: a reader
    that holds the answer as of `since` brings it up to date at the cost of the batches
    since, where reading it whole costs every duplicate the store holds."""
    if table not in answers.LAYERED:
        raise ValueError(f"{table} is not kept one key a row")
    ensure(store)
    segmented = store.segmented()
    with _lock_for(store):
        if segmented is None:
            return _answer_changes_clickhouse(store, table, since)
        state = _STATES.get(store)
        if state is None:
            return AnswerChanges(None)
        now = Mark(state.epoch, state.generation)
        if since is None:
            return AnswerChanges(now)
        units = derived_state.touched_since(segmented, state, since.epoch, since.generation,
                                            {table: "key"})
        if units is None:
            return AnswerChanges(now)
        keys = sorted(units[table])
        text = with_identifiers(sql_text("kept_answer_of_keys", "duckdb"),
                                table=f"{table}_layers")
        rows = segmented.arrow(render(text, "duckdb", {"keys": keys}), {"keys": keys},
                               events=False)
        return AnswerChanges(now, frozenset(keys), rows)


def _answer_changes_clickhouse(store: Store, table: str, since: Mark | None) -> AnswerChanges:
    status = _STATUSES.get(store)
    if status is None:
        return AnswerChanges(None)
    now = Mark(status.epoch, status.generation, status.version)
    if since is None or since.epoch != status.epoch:
        return AnswerChanges(now)
    keys, rows = incremental_clickhouse.answer_changes(_engine(store), table, since.version)
    return AnswerChanges(now, frozenset(keys), rows)


def narrowed(store: Store) -> bool:
    """Whether this thread or task asks `store` of touched units only (`only`)."""
    return id(store) in _ONLY.get()


#: The stores (by id) whose questions this thread or task asks of touched units only.
_ONLY: ContextVar[frozenset[int]] = ContextVar("dupescope_only", default=frozenset())
_NARROWED = re.compile(r"\bderived_(executions|lock_incidents|duplicate_runs)\b")


#: What the `only_derived_*` tables of an embedded store hold: the units, of which
#: derived state, on which connection.
_NARROWED_TO: weakref.WeakKeyDictionary[SegmentedStore, tuple[Any, ...]] = (
    weakref.WeakKeyDictionary())


@contextmanager
def only(store: Store, touched: Touched) -> Iterator[None]:
    """Questions asked of `store` meanwhile (by this thread or task) see the rows of
    `touched` units alone, as asked live: the executions of its keys and every holder of
    a lock_key they held, their lock incidents, and the duplicate runs of its keys. Per-
    key and per-lock_key questions (duplicates, lock overruns, split brains, stale owner
    writes) then answer for what changed, at the cost of what changed."""
    segmented = store.segmented()
    ensure(store)
    with _lock_for(store):
        if segmented is None:
            incremental_clickhouse.narrow(_engine(store), touched.keys, touched.executions)
        else:
            con = segmented.connection(events=False)
            narrowed_to = (touched, _STATES.get(segmented), con)
            if _NARROWED_TO.get(segmented) != narrowed_to:
                # Their rows copied once for every rule of a tick: views scanned the
                # derived executions again in each (0.7 s for split brains at 10M events).
                incremental.strings(con, "only_keys", touched.keys)
                incremental.strings(con, "only_executions", touched.executions)
                for name in ("only_derived_executions", "only_derived_lock_incidents",
                             "only_derived_duplicate_runs"):
                    con.execute(sql_text(name, "duckdb"))
                _NARROWED_TO[segmented] = narrowed_to
    token = _ONLY.set(_ONLY.get() | {id(store)})
    try:
        yield
    finally:
        _ONLY.reset(token)
