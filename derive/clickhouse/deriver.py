"""The ClickHouse and chDB deriver: rows versioned by unit in tables beside `events`.

A derivation is found by when rows were inserted (derive/clickhouse/incremental.py says
how), and kept as `<table>_rows` tables (derive/clickhouse/kept.py), so every process
reading the store shares it; the store's derivation lock lets one process derive at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

import pyarrow as pa

from derive import answers, catalogue
from derive.base import AnswerChanges, HoldsStore, Mark, Touched
from derive.clickhouse import incremental, kept
from derive.library import text
from store.clickhouse import ClickHouseEngine
from store.sql_files import with_identifiers


class ClickHouseDeriver(HoldsStore[ClickHouseEngine]):
    """The derived state of one ClickHouse or chDB store, as this process last saw it."""

    def __init__(self, store: ClickHouseEngine) -> None:
        super().__init__(store)
        #: Where the kept tables stood at this process's last derivation.
        self.status: kept.Status | None = None
        #: The kept runs were found to have the evidence column: asked once a process.
        self.has_evidence = False

    def ensure(self) -> None:
        with self.lock:
            self.store.snapshot_id()  # a store over the exporter's tables refreshes `events`
            self.status = self._ensure()

    def rebuild(self) -> None:
        with self.lock:
            self.store.snapshot_id()
            with self.store.derivation_lock():
                self.status = incremental.build(self.store, self.builds)

    def _ensure(self) -> kept.Status:
        """Bring the derived tables up to date with `events`; returns where they stand."""
        store = self.store
        status = kept.status(store)
        if status is not None and self._lacks_evidence():
            return self._locked_build(always=True)
        if status is not None and status.format in kept.UPGRADABLE:
            status = self._upgrade()
        if status is None or status.format != kept.FORMAT or incremental.days_gone(store, status):
            return self._locked_build()
        if not incremental.moved(store, status):
            return status
        with store.derivation_lock():
            status = kept.status(store)  # another process may have derived meanwhile
            if (status is None or status.format != kept.FORMAT
                    or incremental.days_gone(store, status)):
                return incremental.build(store, self.builds)
            if not incremental.moved(store, status):
                return status
            return incremental.absorb(store, status, self.builds)

    def _upgrade(self) -> kept.Status | None:
        with self.store.derivation_lock():
            status = kept.status(self.store)
            if status is None or status.format not in kept.UPGRADABLE:
                return status
            return incremental.upgrade(self.store, status)

    def _lacks_evidence(self) -> bool:
        if self.has_evidence:
            return False
        found = incremental.evidence(self.store)
        self.has_evidence = found is True
        return found is False

    def _locked_build(self, always: bool = False) -> kept.Status:
        store = self.store
        with store.derivation_lock():
            status = kept.status(store)
            if always and self._lacks_evidence():
                return incremental.build(store, self.builds)
            if (status is not None and status.format == kept.FORMAT
                    and not incremental.days_gone(store, status)
                    and not incremental.moved(store, status)):
                return status  # another process built it meanwhile
            return incremental.build(store, self.builds)

    def tables(self, names: Iterable[str]) -> dict[str, pa.Table]:
        self.ensure()
        read = {}
        for name in names:
            if name in catalogue.answer_tables():
                self._kept_answer(name)
            read[name] = self.store.arrow(with_identifiers(text("kept_table", "clickhouse"),
                                                           table=name))
        return read

    def answer(self, table: str) -> pa.Table:
        self._kept_answer(table)
        sql = answers.read_sql(table, "clickhouse")
        return self.store.arrow(sql).drop_columns(["answer_row"])

    def _kept_answer(self, table: str) -> None:
        with self.lock:
            if self.status is None:
                raise RuntimeError("a kept answer asked for before the derived tables")
            incremental.answer(self.store, table, self.status)

    def touched_since(self, since: Mark | None) -> tuple[Mark | None, Touched | None]:
        self.ensure()
        status = self.status
        if status is None:
            return None, None
        now = Mark(status.epoch, status.generation, status.version)
        if since is None or since.epoch != status.epoch:
            return now, None
        keys, executions = incremental.touched_since(self.store, since.version)
        return now, Touched(frozenset(keys), frozenset(executions))

    def answer_changes(self, table: str, since: Mark | None) -> AnswerChanges:
        self.ensure()
        with self.lock:
            status = self.status
            if status is None:
                return AnswerChanges(None)
            now = Mark(status.epoch, status.generation, status.version)
            if since is None or since.epoch != status.epoch:
                return AnswerChanges(now)
            keys, rows = incremental.answer_changes(self.store, table, since.version)
            return AnswerChanges(now, frozenset(keys), rows)

    def answer_of_keys(self, table: str, keys: list[str]) -> pa.Table:
        self.ensure()
        with self.lock:
            return incremental.answer_of_keys(self.store, table, keys)

    def narrow(self, touched: Touched) -> None:
        self.ensure()
        with self.lock:
            incremental.narrow(self.store, touched.keys, touched.executions)

    def lag_seconds(self) -> float | None:
        return kept.lag_seconds(self.store)

    def write_listing(self, out: BinaryIO) -> bool:
        return False  # no rendering is kept beside versioned rows


