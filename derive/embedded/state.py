"""The embedded store's derived tables on disk, kept in layers so a batch costs a layer.

`<store>/derived/state.json` names what the current state is made of:

- `read`: the segments it was derived from (store/lineage.py), and `snapshot`, their id;
- `layers`: a base layer (a build from nothing) and the layers batches added since. A
  layer holds, per table, `<table>-<layer>.parquet` (rows) and `<table>-<layer>.units.parquet`
  (the values of the table's unit column it replaces: `UNITS`). A table is read as every
  layer's rows whose unit no later layer replaces;
- `answers`: the generation of the kept answers, `answer_<query>-<answers>.parquet`.

Every file is written under a temporary name, fsynced and renamed, and `state.json` last:
a process killed at any point leaves the previous state whole, and the next one derives
the batch again. Files no state names are removed after a grace period, so a reader still
on an older state can finish. Once there are more than `MAX_LAYERS` above the base, the
newest are folded into one layer by size (`fold_span`), and once they hold a quarter of
the base's rows, everything is merged into a new base: each row is rewritten a bounded
number of times, a batch's derivation never waits for a merge, and reading stays a scan
and an anti-join per layer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from derive.library import text
from derive.rename import renamed
from store.base import SegmentedStore
from store.durable import place as place  # re-exported: where the crash tests kill
from store.hot_log import is_log
from store.lineage import commits, lineage
from store.lookup_index import segment_name
from store.sql_files import literal, read, with_identifiers

STATE = "state.json"
_SQL = Path(__file__).parents[2] / "store" / "sql"
STALE_GRACE_SECONDS = 300.0
MAX_LAYERS = 8
#: Generations whose touched units stay answerable (`touched_since`).
JOURNAL = 256
MERGE_SHARE = 0.25
#: 3: executions and duplicate runs say whether a run reported its effect at all.
FORMAT = 3


@dataclass
class State:
    """One derived state: what it read, its layers, its kept answers."""

    snapshot: str
    read: dict[str, int]
    layers: list[str]
    answers: str
    #: Rows per table in each layer (the base's first), to know when to merge.
    sizes: dict[str, list[int]] = field(default_factory=dict)
    #: A build from nothing starts an epoch; each batch derived in it is a generation.
    epoch: str = ""
    generation: int = 0
    #: The layers of the latest generations, oldest first (their units files are kept
    #: after a merge): what a watcher asks "what changed since generation N" of.
    journal: list[str] = field(default_factory=list)

    def as_json(self) -> bytes:
        return json.dumps({
            "format": FORMAT, "snapshot": self.snapshot, "read": self.read,
            "layers": self.layers, "answers": self.answers, "sizes": self.sizes,
            "epoch": self.epoch, "generation": self.generation, "journal": self.journal,
        }, sort_keys=True).encode()


def folder(store: SegmentedStore) -> Path:
    return store.root / "derived"


def new_id() -> str:
    """A layer or answers generation name, ordered by time."""
    return f"{time.time_ns():020d}{uuid.uuid4().hex[:6]}"


def load(store: SegmentedStore) -> State | None:
    """The current state, or None (none written, an older format, unreadable)."""
    try:
        raw = json.loads((folder(store) / STATE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        return None
    return State(raw["snapshot"], raw["read"], raw["layers"], raw["answers"],
                 raw.get("sizes", {}), raw.get("epoch", ""), raw.get("generation", 0),
                 raw.get("journal", []))


def commit(store: SegmentedStore, state: State) -> None:
    """Make `state` the current one (its files are in place already)."""
    target = folder(store) / STATE
    temporary = target.with_name(f".{STATE}.{uuid.uuid4().hex[:8]}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(state.as_json())
    place(temporary, target)


@contextmanager
def exclusive(store: SegmentedStore) -> Iterator[None]:
    """One process at a time derives a new state (others wait, then find it made)."""
    target = folder(store)
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".derive.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def writable(store: SegmentedStore) -> bool:
    """Whether derived state can be kept on disk (a read-only store keeps it in memory)."""
    target = folder(store)
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / f".probe-{uuid.uuid4().hex[:8]}"
        probe.touch()
        probe.unlink()
    except OSError:
        return False
    return True


def rows_path(store: SegmentedStore, table: str, layer: str) -> Path:
    return folder(store) / f"{table}-{layer}.parquet"


def units_path(store: SegmentedStore, table: str, layer: str) -> Path:
    return folder(store) / f"{table}-{layer}.units.parquet"


def write(con: duckdb.DuckDBPyConnection, relation: str, path: Path) -> int:
    """COPY a table or query of `con` to `path` (temporary name, fsync, rename); rows."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    con.execute(f"COPY ({relation}) TO {literal(temporary)} (FORMAT parquet, "
                f"COMPRESSION snappy)")
    place(temporary, path)
    return int(pq.read_metadata(path).num_rows)


def layered_select(
    store: SegmentedStore, table: str, unit: str | None, layers: list[str],
    units: str | None = None,
) -> str:
    """The rows of `table` now: each layer's rows whose unit no later layer replaces
    (the units replaced in table `units`, for rows kept beside that table's)."""
    parts = []
    for i, layer in enumerate(layers):
        rows = f"read_parquet({literal(rows_path(store, table, layer))})"
        later = [units_path(store, units or table, later) for later in layers[i + 1:]]
        if not later or unit is None:
            parts.append(f"SELECT * FROM {rows}")
            continue
        replaced = "read_parquet([" + ", ".join(literal(p) for p in later) + "])"
        unreplaced = with_identifiers(text("layer_rows_unreplaced", "duckdb"), unit=unit)
        parts.append(renamed(unreplaced, "duckdb", {},
                             sources={"layer_rows": rows, "replaced_units": replaced}))
    return " UNION ALL BY NAME ".join(parts)


def attach(
    store: SegmentedStore,
    con: duckdb.DuckDBPyConnection,
    state: State,
    units: dict[str, str | None],
    numbered: dict[str, str],
    answers: tuple[str, ...],
) -> bool:
    """Views of `state`'s tables on `con`, and of those of its `answers` computed so far;
    False (nothing done) if a file of it is missing (removed as stale under a reader
    that took very long). A table in `numbered` (a kept answer kept in layers) has its
    `answer_row` numbered again in that order, and a view `<table>_layers` unnumbered."""
    needed = [rows_path(store, t, layer) for t in units for layer in state.layers]
    needed += [units_path(store, t, layer) for t in units for layer in state.layers[1:]
               if units[t] is not None]
    if not all(p.exists() for p in needed):
        return False
    for table, unit in units.items():
        drop(con, table)
        select = layered_select(store, table, unit, state.layers)
        if table in numbered:
            # Unnumbered too, for reads of a few keys' rows (a numbering sorts them all).
            drop(con, f"{table}_layers")
            con.execute(f"CREATE TEMP VIEW {table}_layers AS {select}")
            select = (f"SELECT row_number() OVER (ORDER BY {numbered[table]}) AS answer_row, "
                      f"* EXCLUDE (answer_row) FROM {table}_layers")
        con.execute(f"CREATE TEMP VIEW {table} AS {select}")
    for answer in answers:
        drop(con, answer)
        path = rows_path(store, answer, state.answers)
        if path.exists():
            con.execute(
                f"CREATE TEMP VIEW {answer} AS SELECT * FROM read_parquet({literal(path)})")
    return True


def attach_layers(store: SegmentedStore, con: duckdb.DuckDBPyConnection, state: State,
                  table: str, unit: str) -> bool:
    """A view `<table>_layers` of one layered table of `state`, unnumbered, and nothing
    else: for a reader of a few keys' rows (`dupescope timeline`), which has no use for
    the views of every other table (a third of its lookup); False if a file is missing."""
    needed = [rows_path(store, table, layer) for layer in state.layers]
    needed += [units_path(store, table, layer) for layer in state.layers[1:]]
    if not all(p.exists() for p in needed):
        return False
    drop(con, f"{table}_layers")
    con.execute(f"CREATE TEMP VIEW {table}_layers AS "
                f"{layered_select(store, table, unit, state.layers)}")
    return True


def keep(con: duckdb.DuckDBPyConnection, table: str, store: SegmentedStore,
         state: State) -> None:
    """Keep a kept answer computed on demand with `state`'s files (best effort: a
    read-only store just holds it in memory)."""
    with contextlib.suppress(OSError):
        write(con, f"SELECT * FROM {table}", rows_path(store, table, state.answers))


def drop(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop a temp table or view of that name, whichever it is."""
    for statement in ("derived_view_drop", "derived_table_drop"):
        with contextlib.suppress(duckdb.CatalogException):
            con.execute(with_identifiers(read(_SQL, statement, "duckdb"), table=name))


def should_merge(state: State) -> bool:
    """Whether the layers above the base are worth folding into a new base: once they
    hold a quarter of its rows, all tables together (so each row is rewritten into a base
    a bounded number of times). A merge rewrites every table; judged table by table, a
    small one (a few hundred segment counts) called for it every few batches, and at 10M
    events each took 4 s."""
    base = sum(counts[0] for counts in state.sizes.values() if counts)
    above = sum(sum(counts[1:]) for counts in state.sizes.values())
    return above > MERGE_SHARE * max(base, 1000)


def fold_span(state: State) -> int:
    """How many of the newest layers to fold into one layer, leaving the base as it is
    (0: none). Once more than MAX_LAYERS are above the base: the newest two, and each
    older one no larger than those after it together. Layers then grow geometrically,
    older ones larger, so a row is folded again a few times at most, and a fold costs
    what the layers it folds hold; a merge into a new base, what the store holds (86 s
    every eighth batch at 100M events, when it was also made for the number of layers)."""
    upper = len(state.layers) - 1
    if upper <= MAX_LAYERS:
        return 0
    sizes = [sum(counts[i] for counts in state.sizes.values() if i < len(counts))
             for i in range(len(state.layers))]
    span, folded = 2, sizes[-1] + sizes[-2]
    while span < upper and sizes[-span - 1] <= folded:
        folded += sizes[-span - 1]
        span += 1
    return span


def units_select(store: SegmentedStore, table: str, layers: list[str]) -> str:
    """Every unit of `table` these layers replace, once."""
    units = "[" + ", ".join(literal(units_path(store, table, layer)) for layer in layers) + "]"
    return renamed(text("layer_units", "duckdb"), "duckdb", {},
                   sources={"replaced_units": f"read_parquet({units})"})


def touched_since(
    store: SegmentedStore, state: State, epoch: str, generation: int, tables: dict[str, str]
) -> dict[str, set[str]] | None:
    """The units each of `tables` (table -> its unit column) had replaced since generation
    `generation` of `epoch`; None when the journal does not reach back that far (another
    epoch: a build from nothing, or too many generations since)."""
    behind = state.generation - generation
    if epoch != state.epoch or behind < 0 or behind > len(state.journal):
        return None
    touched: dict[str, set[str]] = {table: set() for table in tables}
    for layer in state.journal[len(state.journal) - behind:]:
        for table in tables:
            path = units_path(store, table, layer)
            touched[table].update(pq.read_table(path)["unit"].to_pylist())
    return touched


def remove_stale(store: SegmentedStore, state: State) -> None:
    """Remove files `state` does not name, once older than the grace period (the units
    files of the journal's layers are kept)."""
    target = folder(store)
    keep = set(state.layers) | {state.answers}
    journal = set(state.journal)
    cutoff = time.time() - STALE_GRACE_SECONDS
    for entry in target.iterdir():
        name = entry.name
        if name.endswith((".parquet", ".listing")) and not name.startswith("."):
            stem = name.rpartition(".")[0].removesuffix(".units")
            layer = stem.rpartition("-")[2]
            if layer in keep or (layer in journal and name.endswith(".units.parquet")):
                continue
        elif not name.endswith(".tmp"):
            continue
        with contextlib.suppress(FileNotFoundError):
            if entry.stat().st_mtime < cutoff:
                entry.unlink()


def lag_seconds(store: SegmentedStore, now: float | None = None) -> float | None:
    """How long the oldest write no kept derived state has taken has waited: 0 when the
    state holds everything, None when no state is kept yet. A merged segment of segments
    the state read brings nothing new; a hot log that grew counts from the state's own
    time, the latest its unread frames can be older than."""
    state = load(store)
    if state is None:
        return None
    try:
        written = (folder(store) / STATE).stat().st_mtime
    except FileNotFoundError:
        return None
    oldest: float | None = None
    for path in store.segments():
        name = segment_name(path)
        known = state.read.get(name)
        try:
            if known is not None:
                if not is_log(path) or commits(path) <= known:
                    continue
                since = min(path.stat().st_mtime, written)
            else:
                inputs = lineage(path)
                if inputs is not None and all(state.read.get(i, -1) >= n
                                              for i, n in inputs.items()):
                    continue
                since = path.stat().st_mtime
        except FileNotFoundError:
            continue  # compacted away meanwhile
        oldest = since if oldest is None else min(oldest, since)
    if oldest is None:
        return 0.0
    return max((time.time() if now is None else now) - oldest, 0.0)
