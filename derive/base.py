"""What a deriver does, whatever the engine: the `Deriver` protocol and its marks.

A deriver keeps one store's derived tables and kept answers (derive/catalogue.py) current
with its events, batch by batch, and hands them to the questions. The embedded store keeps
them as layers of Parquet files beside its segments (derive/embedded/), ClickHouse and
chDB as rows versioned by unit beside `events` (derive/clickhouse/); derive/open.py
picks one. Per-store state (what was built, the kept state attached, a lock) lives in the
deriver, so a process holds one deriver per store.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO, Generic, Protocol, TypeVar

import pyarrow as pa

from derive.progress import Builds

#: A batch of more rows than this, and larger than the store's executions twice over, is
#: derived by a build from nothing: fetching the history of most keys one lookup at a
#: time costs more than reading everything once (a file ingested into a young store).
LARGE_BATCH_ROWS = 500_000


def too_large(rows: int, executions: int) -> bool:
    """Whether a batch of `rows` is better built from nothing than absorbed."""
    return rows > LARGE_BATCH_ROWS and rows > 2 * executions


#: Rows of the kept duplicates answer (in its order, its columns as the question gives
#: them) rendered as the command prints them: JSON lines, a block of whole lines at a
#: time. A deriver that keeps a listing beside its state renders each batch's rows with
#: it once, so that printing every duplicate copies bytes instead of rendering rows.
RenderRows = Callable[[pa.Table], Iterable[bytes]]

StoreT = TypeVar("StoreT")


class HoldsStore(Generic[StoreT]):
    """A deriver's store, held weakly (a process keeps its derivers by store, and must not
    keep the store), and the lock its derivations take."""

    def __init__(self, store: StoreT) -> None:
        self._store = weakref.ref(store)
        self.lock = threading.Lock()
        #: Told each step of a build from nothing (derive/progress.py).
        self.builds = Builds()

    @property
    def store(self) -> StoreT:
        store = self._store()
        if store is None:
            raise ReferenceError("the store of this deriver is closed and gone")
        return store


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


@dataclass(frozen=True)
class AnswerChanges:
    """Where a kept answer of one key a row stands (`mark`), and what changed in it since
    an earlier mark: the keys whose rows were replaced, with their rows now (a key
    without a row has none any more). `keys` None: anything may have changed."""

    mark: Mark | None
    keys: frozenset[str] | None = None
    rows: pa.Table | None = None


class Deriver(Protocol):
    """The derived state of one store.

    `lock` serialises its users within a process; between processes each engine has its
    own (a file lock beside the embedded state, the store's derivation lock)."""

    lock: threading.Lock
    #: Told each step of a build from nothing (derive/progress.py).
    builds: Builds

    def ensure(self) -> None:
        """Bring the derived tables up to date with the events (absorb what arrived since,
        or build from nothing where that is cheaper or the kept state is unusable)."""

    def rebuild(self) -> None:
        """Build from nothing, whatever was built or kept before (`dupescope rebuild`)."""

    def tables(self, names: Iterable[str]) -> dict[str, pa.Table]:
        """Derived tables and kept answers of the current state, as they are kept."""

    def answer(self, table: str) -> pa.Table:
        """Kept answer `table` in its question's order (computed if it was not yet)."""

    def touched_since(self, since: Mark | None) -> tuple[Mark | None, Touched | None]:
        """Where the state is now, and what changed since `since` (None: anything may)."""

    def answer_changes(self, table: str, since: Mark | None) -> AnswerChanges:
        """What kept answer `table`, of one key a row, changed since `since`."""

    def answer_of_keys(self, table: str, keys: list[str]) -> pa.Table:
        """The rows kept answer `table`, of one key a row, holds now for `keys` (a key
        with no row has none), unnumbered: one key's row at the cost of its keys."""

    def narrow(self, touched: Touched) -> None:
        """Fill the `only_derived_*` tables with the rows of `touched` units alone."""

    def lag_seconds(self) -> float | None:
        """How far the kept state is behind the events, in seconds (None: none kept)."""

    def write_listing(self, out: BinaryIO) -> bool:
        """Print every row of the kept duplicates answer to `out` as one JSON array of
        the rows `RenderRows` rendered, from the rendering kept beside the current state;
        False (nothing printed) where none is kept (a deriver opened without a renderer,
        a state held in memory, ClickHouse)."""
