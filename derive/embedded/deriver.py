"""The embedded store's deriver: layers of Parquet files under `<store>/derived/`.

A kept state is found by what the segments gained since it (derive/embedded/state.py), so
a one-shot CLI process and the dashboard reuse one state instead of each paying for it: a
process attaches the kept state if it is current, else derives what changed since it (or
builds from nothing) and keeps that, under a file lock that one process holds at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, BinaryIO

import duckdb
import pyarrow as pa

from derive import answers, catalogue
from derive.base import AnswerChanges, HoldsStore, Mark, RenderRows, Touched, too_large
from derive.embedded import incremental, layers, listing
from derive.embedded import state as derived_state
from derive.embedded.build import create_answer, exists
from derive.library import render, text
from derive.progress import BuildSteps
from store import materialised
from store.base import SegmentedStore
from store.lineage import Changes, commits
from store.lookup_index import segment_name
from store.sql_files import with_identifiers

log = logging.getLogger("dupescope.queries")


def _none(store: SegmentedStore, layer: str) -> None:
    """Nothing kept rendered beside a layer."""


class EmbeddedDeriver(HoldsStore[SegmentedStore]):
    """The derived state of one embedded store, in this process."""

    def __init__(self, store: SegmentedStore, render: RenderRows | None = None) -> None:
        super().__init__(store)
        #: The segments snapshot the attached state is of (None: nothing attached yet).
        self.built: str | None = None
        #: The kept state attached to the store's connection.
        self.state: derived_state.State | None = None
        #: What the `only_derived_*` tables hold: units, of which state, on which connection.
        self.narrowed_to: tuple[Any, ...] | None = None
        #: How the duplicates are rendered beside each layer (None: not kept rendered).
        self.render = render
        self.rendered: layers.Rendered = _none if render is None else self._keep_listing

    def ensure(self) -> None:
        with self.lock:
            self._ensure()

    def _ensure(self) -> None:
        store = self.store
        for attempt in range(2):
            read = self._read_now()
            # A kept state current or a batch to absorb reads no `events` (a build does).
            con, current = store.pinned_connection(events=False)
            if self.built == current:
                return
            try:
                if not derived_state.writable(store):
                    con, current = store.pinned_connection()
                    self._build_in_memory(con)
                else:
                    current = self._derive_and_keep(con, current, read)
            except (duckdb.IOException, FileNotFoundError):
                # A segment listed a moment ago was compacted away: list again, once.
                store.forget_snapshot()
                if attempt:
                    raise
                continue
            self.built = current
            return

    def rebuild(self) -> None:
        store = self.store
        with self.lock:
            self.built = None
            materialised.forget_checks(store)
            read = self._read_now()
            con, current = store.pinned_connection()
            if not derived_state.writable(store):
                self._build_in_memory(con)
            else:
                with derived_state.exclusive(store):
                    state = layers.base(store, con, current, read, self.rendered,
                                        self.builds)
                    self._commit(con, state)
                    derived_state.remove_stale(store, state)
            self.built = current

    def _build_in_memory(self, con: duckdb.DuckDBPyConnection) -> None:
        """Everything built on `con` alone (a store this process cannot write), each step
        told to the deriver's listeners."""
        steps = BuildSteps(self.builds)
        layers.build_in_memory(self.store, con, steps=steps)
        steps.finish()

    def _read_now(self) -> dict[str, int]:
        """The segments and log frames there are now (listed before the reader's snapshot
        is pinned, so that the snapshot holds at least these)."""
        return {segment_name(p): commits(p) for p in self.store.segments()}

    def _derive_and_keep(self, con: duckdb.DuckDBPyConnection, current: str,
                         read: dict[str, int]) -> str:
        """Attach the kept state of snapshot `current`, or derive and keep it; returns the
        snapshot the attached state is of (a build pins the segments again, with
        `events`)."""
        store = self.store
        state = derived_state.load(store)
        if state is not None and state.snapshot == current and self._attach(con, state):
            return current
        with derived_state.exclusive(store):
            state = derived_state.load(store)  # another process may have made it meanwhile
            if state is not None and state.snapshot == current and self._attach(con, state):
                return current
            changes = None
            if state is not None and self._attach(con, state):
                changes = store.changes_since(state.read)
            if state is None or changes is None or self._too_large(changes, state):
                con, current = store.pinned_connection()
                state = layers.base(store, con, current, read, self.rendered, self.builds)
            else:
                state = self._absorb(con, state, changes, current)
            self._commit(con, state)
            # The batch is kept and readable: now fold or merge layers if they are due.
            compacted = layers.compacted(store, con, state, self.rendered)
            if compacted is not state:
                self._commit(con, compacted)
            derived_state.remove_stale(store, compacted)
        return current

    def _absorb(self, con: duckdb.DuckDBPyConnection, state: derived_state.State,
                changes: Changes, current: str) -> derived_state.State:
        started = time.perf_counter()
        grown = layers.absorb(self.store, con, state, changes, current, self.rendered)
        if not self._attach(con, grown):
            raise FileNotFoundError("a derived layer just written is incomplete")
        log.debug("absorbed %d new rows in %.2f s", changes.rows().num_rows,
                  time.perf_counter() - started)
        return grown

    @staticmethod
    def _too_large(changes: Changes, state: derived_state.State) -> bool:
        rows = sum(int(t.num_rows) for t in [*changes.added, *changes.removed])
        return too_large(rows, sum(state.sizes.get("derived_executions", [])))

    def _commit(self, con: duckdb.DuckDBPyConnection, state: derived_state.State) -> None:
        derived_state.commit(self.store, state)
        if self.state is state:
            return  # attached once its files were written (`_absorb`): the views hold
        if not self._attach(con, state):
            raise FileNotFoundError("a derived state just written is incomplete")

    def _attach(self, con: duckdb.DuckDBPyConnection, state: derived_state.State) -> bool:
        by_key = catalogue.by_key()
        lazy = tuple(t for t in catalogue.answer_tables() if t not in by_key)
        if not derived_state.attach(self.store, con, state, dict(incremental.layered()),
                                    by_key, lazy):
            return False
        self.state = state
        return True

    def tables(self, names: Iterable[str]) -> dict[str, pa.Table]:
        self.ensure()
        read = {}
        for name in names:
            if name in catalogue.answer_tables():
                self._kept_answer(name)
            read[name] = self.store.arrow(with_identifiers(text("kept_table", "duckdb"),
                                                           table=name))
        return read

    def answer(self, table: str) -> pa.Table:
        sql = self._kept_answer(table)
        return self.store.arrow(sql, events=False).drop_columns(["answer_row"])

    def _kept_answer(self, table: str) -> str:
        """Make kept answer `table` readable; returns the statement that reads it."""
        by_key = catalogue.by_key()
        with self.lock:
            layered = table in by_key
            con = self.store.connection(events=not layered)
            if layered and exists(con, f"{table}_layers"):
                # Read once in its order from the layers: numbering them first sorted
                # them twice (0.7 s more for the 600k duplicates of 100M events).
                return f"SELECT * FROM {table}_layers ORDER BY {by_key[table]}"
            if not exists(con, table):
                self._compute_answer(con, table)
            materialised.hold(con, table)
        return answers.read_sql(table, "duckdb")

    def _compute_answer(self, con: duckdb.DuckDBPyConnection, table: str) -> None:
        """A kept answer first asked for in this state: computed from the derived tables
        and kept beside them, so the next process reads it."""
        started = time.perf_counter()
        name = table.removeprefix("answer_")
        create_answer(con, table, answers.select(name, "duckdb", counted=True))
        if self.state is not None:
            derived_state.keep(con, table, self.store, self.state)
        log.debug("kept answer %s computed in %.2f s", table, time.perf_counter() - started)

    def touched_since(self, since: Mark | None) -> tuple[Mark | None, Touched | None]:
        self.ensure()
        state = self.state
        if state is None:
            return None, None
        now = Mark(state.epoch, state.generation)
        if since is None:
            return now, None
        units = derived_state.touched_since(
            self.store, state, since.epoch, since.generation,
            {"derived_executions": "key", "derived_lock_incidents": "execution_uid"})
        if units is None:
            return now, None
        return now, Touched(frozenset(units["derived_executions"]),
                            frozenset(units["derived_lock_incidents"]))

    def answer_changes(self, table: str, since: Mark | None) -> AnswerChanges:
        self.ensure()
        with self.lock:
            state = self.state
            if state is None:
                return AnswerChanges(None)
            now = Mark(state.epoch, state.generation)
            if since is None:
                return AnswerChanges(now)
            units = derived_state.touched_since(self.store, state, since.epoch,
                                                since.generation, {table: "key"})
            if units is None:
                return AnswerChanges(now)
            keys = sorted(units[table])
            sql = with_identifiers(text("kept_answer_of_keys", "duckdb"),
                                   table=f"{table}_layers")
            rows = self.store.arrow(render(sql, "duckdb", {"keys": keys}), {"keys": keys},
                                    events=False)
            return AnswerChanges(now, frozenset(keys), rows)

    def answer_of_keys(self, table: str, keys: list[str]) -> pa.Table:
        layered = self._attach_current_layers(table)
        if not layered:
            self.ensure()
            self._kept_answer(table)
            with self.lock:
                layered = exists(self.store.connection(events=False), f"{table}_layers")
        sql = with_identifiers(text("kept_answer_of_keys", "duckdb"),
                               table=f"{table}_layers" if layered else table)
        return self.store.arrow(render(sql, "duckdb", {"keys": keys}), {"keys": keys},
                                events=False)

    def _attach_current_layers(self, table: str) -> bool:
        """In a process that has attached nothing yet, the layers of `table` alone, if the
        kept state is current (what `ensure` would attach, less every other view); False
        where `ensure` must run: nothing kept, a batch to absorb, a table not layered."""
        with self.lock:
            unit = incremental.layered().get(table)
            if self.built is not None or unit is None:
                return False
            state = derived_state.load(self.store)
            con, current = self.store.pinned_connection(events=False)
            if state is None or state.snapshot != current:
                return False
            return derived_state.attach_layers(self.store, con, state, table, unit)

    def narrow(self, touched: Touched) -> None:
        self.ensure()
        with self.lock:
            con = self.store.connection(events=False)
            narrowed_to = (touched, self.state, con)
            if self.narrowed_to == narrowed_to:
                return
            # Their rows copied once for every rule of a tick: views scanned the derived
            # executions again in each (0.7 s for split brains at 10M events).
            incremental.strings(con, "only_keys", touched.keys)
            incremental.strings(con, "only_executions", touched.executions)
            for name in ("only_derived_executions", "only_derived_lock_incidents",
                         "only_derived_duplicate_runs"):
                con.execute(text(name, "duckdb"))
            self.narrowed_to = narrowed_to

    def lag_seconds(self) -> float | None:
        return derived_state.lag_seconds(self.store)

    def write_listing(self, out: BinaryIO) -> bool:
        self.ensure()
        with self.lock:
            state = self.state if self.built is not None else None
        if state is None or self.render is None:
            return False  # a read-only store holds its state in memory
        return listing.write(self.store, state, out)

    def _keep_listing(self, store: SegmentedStore, layer: str) -> None:
        """The layer's duplicates rendered as the command prints them (listing.py)."""
        assert self.render is not None
        started = time.perf_counter()
        listing.keep_layer(store, layer, self.render)
        log.debug("kept the duplicates listing in %.2f s", time.perf_counter() - started)
