"""Every derived table and every kept answer, declared once.

A derived table is one query file (`derive/sql/<file>.sql`, a ClickHouse variant in
`derive/sql/clickhouse/` only where the dialects differ) and one `Table` line below: its
name, its file, its unit of re-derivation and the order it is kept in. Both engines build
the tables in the order of `TABLES` (each reads the ones before it), and derive a batch
again unit by unit:

- `key`: the executions, runs and lookups of a key (its idempotency key, else its
  job_id), derived again over every row of the jobs of the keys a batch touches;
- `job_id`: what depends on one job's own events, over the same rows;
- `event_uid`: one event (a worker's start or stop), derived from the batch's own rows;
- `execution_uid`: a lock incident, derived again for every holder of a lock_key a
  touched execution holds (`derive/embedded/incremental.py` says why);
- `segment`: an embedded segment's counts, from the segment's own rows.

A kept answer is a question (`queries/sql/<name>.sql`) asked with fixed parameters, the
answer a page opens with; `Answer` names it, its parameters, and for an answer of one key
a row (`by_key`), its order, so that it is kept in layers like the tables.

The checks at the end run at import: a table without a unit, a unit no engine knows how to
derive again, or an answer of one key a row without an order fails there, not in a batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from derive.defaults import SKEW_TOLERANCE_MS, STAMPEDE_MIN_EXECUTIONS, STAMPEDE_WINDOW_US


@dataclass(frozen=True)
class Table:
    """One derived table.

    `file`: its query file. `unit`: the column whose values a batch derives again (None:
    a build stage, dropped once the build is done). `order`: the ORDER BY it is kept in
    (min/max statistics then narrow a search to a row group or two); `sorted_by_query`:
    the file sorts it already. `engines`: where it is kept. `chained`: built with the
    others from the events (False: by a step of its own, the segment counts).
    `lookup`: a column its kept rows are also looked up by on ClickHouse."""

    name: str
    file: str
    unit: str | None
    order: str = ""
    sorted_by_query: bool = False
    engines: tuple[str, ...] = ("duckdb", "clickhouse")
    chained: bool = True
    lookup: str | None = None


@dataclass(frozen=True)
class Answer:
    """One kept answer: question `name` asked with `params`. `by_key`: the answer has one
    row per key, kept in layers by key, and this is its query's ORDER BY. `counted`: the
    file that adds it up from an embedded store's per-segment counts."""

    name: str
    params: MappingProxyType[str, Any] = field(
        default_factory=lambda: MappingProxyType({}))
    by_key: str | None = None
    counted: str | None = None

    @property
    def table(self) -> str:
        return f"answer_{self.name}"


def _params(**values: Any) -> MappingProxyType[str, Any]:
    return MappingProxyType(values)


#: In build order: each reads the ones before it.
TABLES: tuple[Table, ...] = (
    Table("derived_outcomes", "derive_execution_outcomes", None),
    Table("derived_executions", "derive_executions", "key", order="end_us",
          lookup="lock_key"),
    Table("derived_lock_incidents", "derive_lock_incidents", "execution_uid"),
    Table("derived_duplicate_runs", "derive_duplicate_runs", "key", order="key, start_us",
          sorted_by_query=True),
    Table("derived_jobs", "derive_jobs", "job_id"),
    Table("derived_lifecycle", "derive_lifecycle", "event_uid"),
    Table("derived_key_runs", "derive_key_runs", "key"),
    Table("derived_lookup", "derive_lookup", "key", order="value, kind, key",
          sorted_by_query=True),
    Table("derived_redeliveries", "derive_redeliveries", "key"),
    Table("derived_segment_counts", "derive_segment_counts", "segment",
          engines=("duckdb",), chained=False),
)

#: Every execution filter unset: what `queries.duplicates_table.filters()` binds by default.
UNFILTERED = _params(job_type=None, queue=None, since_us=None, until_us=None)

ANSWERS: tuple[Answer, ...] = (
    Answer("store_summary", counted="kept_store_summary"),
    Answer("filter_values", counted="kept_filter_values"),
    Answer("duplicates", UNFILTERED, by_key="first_us, key"),
    Answer("lock_overruns", UNFILTERED),
    Answer("split_brains", UNFILTERED),
    Answer("stale_owner_writes", UNFILTERED),
    Answer("durations", UNFILTERED),
    Answer("lint_facts", UNFILTERED),
    Answer("checklist_job_types", UNFILTERED),
    Answer("checklist_outbox", UNFILTERED),
    Answer("checklist_crash_loops", _params(since_us=None, until_us=None)),
    Answer("checklist_clock_skew", _params(**UNFILTERED, tolerance_ms=SKEW_TOLERANCE_MS)),
    Answer("checklist_stampedes", _params(**UNFILTERED, window_us=STAMPEDE_WINDOW_US,
                                          min_executions=STAMPEDE_MIN_EXECUTIONS)),
)

#: Per unit, on ClickHouse, the work table that lists the units a batch touches
#: (derive/sql/clickhouse/derive_work_*.sql); on the embedded store, the temp table.
TOUCHED: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType({
    "clickhouse": MappingProxyType({
        "key": "derive_work_keys",
        "job_id": "derive_work_all_jobs",
        "event_uid": "derive_work_batch_events",
        "execution_uid": "derive_work_holder_units",
    }),
    "duckdb": MappingProxyType({
        "key": "touched_keys",
        "job_id": "touched_jobs",
        "event_uid": "added_rows",
        "execution_uid": "rederived_holders",
        "segment": "recounted_segments",
    }),
})

#: Units whose rows gather the executions of many keys (a lock_key's holders): a build
#: split by key (derive/embedded/partitioned.py) derives them once the parts are built.
CROSS_KEY_UNITS = ("execution_uid",)

#: Units whose tables a batch prunes from a chain built over the touched rows (the
#: others are derived by steps of their own: lock incidents, lifecycle, segment counts).
PRUNED_UNITS = ("key", "job_id")


def by_name(name: str) -> Table:
    """The table of that name."""
    for table in TABLES:
        if table.name == name:
            return table
    raise KeyError(f"no derived table named {name!r}")


def kept(engine: str) -> tuple[Table, ...]:
    """The tables kept on `engine` (`duckdb` or `clickhouse`), in build order."""
    return tuple(t for t in TABLES if t.unit is not None and engine in t.engines)


def chained(engine: str) -> tuple[Table, ...]:
    """The tables built one after another from the events on `engine`."""
    return tuple(t for t in TABLES if t.chained and engine in t.engines)


def answer(name: str) -> Answer:
    """The kept answer of question `name`."""
    for found in ANSWERS:
        if found.name == name:
            return found
    raise KeyError(f"no kept answer named {name!r}")


def answer_tables() -> tuple[str, ...]:
    """Every kept answer's table."""
    return tuple(a.table for a in ANSWERS)


def by_key() -> dict[str, str]:
    """Kept answers of one key a row: table -> its order."""
    return {a.table: a.by_key for a in ANSWERS if a.by_key is not None}


def table_for(name: str, params: dict[str, Any]) -> str | None:
    """The kept table answering question `name` with `params`, or None if not kept."""
    for found in ANSWERS:
        if found.name == name:
            return found.table if dict(params) == dict(found.params) else None
    return None


def check(tables: tuple[Table, ...] = TABLES,
          answers: tuple[Answer, ...] = ANSWERS) -> None:
    """Refuse a catalogue an engine could not keep: names twice, a kept table whose unit
    an engine has no touched set for, an engine nobody derives on."""
    names = [t.name for t in tables] + [a.table for a in answers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"derived tables or answers declared twice: {twice}")
    for table in tables:
        if not table.name.startswith("derived_"):
            raise ValueError(f"{table.name}: a derived table's name starts with derived_")
        for engine in table.engines:
            if engine not in TOUCHED:
                raise ValueError(f"{table.name}: no deriver for engine {engine!r}")
            if table.unit is not None and table.unit not in TOUCHED[engine]:
                raise ValueError(f"{table.name}: unit {table.unit!r} has no touched set "
                                 f"on {engine}")
        if table.unit is None and not table.chained:
            raise ValueError(f"{table.name}: a build stage is built with the others")


check()
