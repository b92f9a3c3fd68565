"""The layers of an embedded store's derived state: a base, a batch, a fold and a merge.

Each function writes the files of one new layer under `<store>/derived/` and returns the
state that names it; the caller commits and attaches it (derive/embedded/state.py says
how a state is kept and read). `rendered` is called with each new layer, for what is kept
rendered beside it (the duplicates listing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import duckdb

from derive import catalogue
from derive.embedded import incremental, partitioned
from derive.embedded import state as derived_state
from derive.embedded.build import (
    build_tables,
    create_on,
    every_answer,
    kept_order,
    layered_answers,
    within_budget,
)
from derive.progress import Builds, BuildSteps
from store import materialised
from store.base import SegmentedStore
from store.lineage import Changes

log = logging.getLogger("dupescope.queries")

#: Called with a store and each new layer's id.
Rendered = Callable[[SegmentedStore, str], None]


def _table(name: str) -> catalogue.Table | None:
    return next((t for t in catalogue.TABLES if t.name == name), None)


def _order(name: str, built: bool) -> str:
    table = _table(name)
    return "" if table is None else kept_order(table, built)


def build_in_memory(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
                    answers: bool = True, steps: BuildSteps | None = None) -> None:
    """Everything built on the reader's connection (`answers`: every kept answer, as a
    read-only store needs; else only those kept in layers), each stage told to `steps`
    (the caller says when the build is done)."""
    steps = steps or BuildSteps(None)
    steps.expect(1)  # the answers, last
    with within_budget(con):
        parts = partitioned.parts_for(partitioned.event_count(con))
        if parts > 1:
            partitioned.build_tables(con, parts, steps)
        else:
            steps.expect(2 + len(catalogue.chained("duckdb")))
            steps.begin("unique_events")
            _hold_unique_events(con, materialised.unique_events(store, con))
            build_tables(con, steps)
        steps.begin("answers")
        incremental.count_segments(con, store.segments())
        if answers:
            every_answer(con)
        else:
            layered_answers(con)


def _hold_unique_events(con: duckdb.DuckDBPyConnection, deduplicated: str) -> None:
    """`unique_events` held once, where DuckDB can spill it, when repeats are dropped: a
    view would drop them again for every table that reads it. An earlier build's view or
    table on this connection is replaced (`create_on` drops it as what it is)."""
    create_on(con, "unique_events", deduplicated, view=deduplicated == materialised.ALL_EVENTS)


def base(store: SegmentedStore, con: duckdb.DuckDBPyConnection, snapshot: str,
         read: dict[str, int], rendered: Rendered,
         builds: Builds | None = None) -> derived_state.State:
    """Everything from nothing, kept as a base layer (the other kept answers are computed
    when first asked for), each step told to `builds` as it begins."""
    started = time.perf_counter()
    steps = BuildSteps(builds)
    steps.expect(len(incremental.layered()) + 1)  # each table written, the listing
    build_in_memory(store, con, answers=False, steps=steps)
    log.debug("derived tables built in %.2f s", time.perf_counter() - started)
    layer = derived_state.new_id()
    sizes = {}
    with within_budget(con):
        for table in incremental.layered():
            steps.begin(f"kept {table}")
            written = time.perf_counter()
            sizes[table] = [derived_state.write(
                con, f"SELECT * FROM {table}{_order(table, built=True)}",
                derived_state.rows_path(store, table, layer))]
            log.debug("kept %s in %.2f s", table, time.perf_counter() - written)
    steps.begin("duplicates listing")
    rendered(store, layer)
    steps.finish()
    return derived_state.State(snapshot, read, [layer], derived_state.new_id(), sizes,
                               epoch=layer)


def absorb(store: SegmentedStore, con: duckdb.DuckDBPyConnection, state: derived_state.State,
           changes: Changes, current: str, rendered: Rendered) -> derived_state.State:
    """A new state: `state` and a layer of what `changes` touch, its answers again."""
    layer = derived_state.new_id()
    sizes = incremental.derive(store, con, changes, layer)
    rendered(store, layer)
    return derived_state.State(
        snapshot=current,
        read=changes.read,
        layers=[*state.layers, layer],
        answers=derived_state.new_id(),  # computed when first asked for
        sizes={t: [*state.sizes.get(t, []), n] for t, n in sizes.items()},
        epoch=state.epoch,
        generation=state.generation + 1,
        journal=[*state.journal, layer][-derived_state.JOURNAL:],
    )


def compacted(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
              state: derived_state.State, rendered: Rendered) -> derived_state.State:
    """`state` with its layers merged into a new base or its newest folded, where due
    (derive/embedded/state.py); `state` itself where neither is."""
    if derived_state.should_merge(state):
        return _merge(store, con, state, rendered)
    span = derived_state.fold_span(state)
    return _fold(store, con, state, span, rendered) if span else state


def _fold(store: SegmentedStore, con: duckdb.DuckDBPyConnection, state: derived_state.State,
          span: int, rendered: Rendered) -> derived_state.State:
    """The newest `span` layers folded into one: their rows now, and every unit any of
    them replaces (so the older layers' rows of those units stay hidden)."""
    started = time.perf_counter()
    folded = state.layers[-span:]
    layer = derived_state.new_id()
    sizes = {}
    for table, unit in incremental.layered().items():
        rows = derived_state.layered_select(store, table, unit, folded)
        sizes[table] = [*state.sizes.get(table, [])[:-span], derived_state.write(
            con, f"SELECT * FROM ({rows}){_order(table, built=False)}",
            derived_state.rows_path(store, table, layer))]
        derived_state.write(con, derived_state.units_select(store, table, folded),
                            derived_state.units_path(store, table, layer))
    rendered(store, layer)
    log.debug("folded %d layers in %.2f s", span, time.perf_counter() - started)
    return derived_state.State(state.snapshot, state.read, [*state.layers[:-span], layer],
                               state.answers, sizes, state.epoch, state.generation,
                               state.journal)


def _merge(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
           state: derived_state.State, rendered: Rendered) -> derived_state.State:
    """Fold every layer into a new base (each table written in its build's order)."""
    layer = derived_state.new_id()
    sizes = {}
    for table in incremental.layered():
        sizes[table] = [derived_state.write(
            con, f"SELECT * FROM {table}{_order(table, built=False)}",
            derived_state.rows_path(store, table, layer))]
    rendered(store, layer)
    return derived_state.State(state.snapshot, state.read, [layer], state.answers, sizes,
                               state.epoch, state.generation, state.journal)
