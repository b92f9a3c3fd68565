"""Answers kept with the derived tables: what a page asks on arrival, computed per snapshot.

Every dashboard page opens without filters, and its questions then have one answer per
store snapshot. Those answers are computed when the derived tables are built and kept
beside them (`answer_<query>` tables, persisted like the rest on the embedded store), so a
page reads a few small tables instead of aggregating a million executions. A question
asked with any filter set runs its query as before.

Each kept table carries `answer_row`, the row's place in the query's own ORDER BY, so the
kept answer comes back in the same order on every engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from derive.defaults import SKEW_TOLERANCE_MS, STAMPEDE_MIN_EXECUTIONS, STAMPEDE_WINDOW_US
from queries.loader import literal, render, sql_text
from store.base import Store
from store.sql_files import with_identifiers

#: Every execution filter unset: what `queries.duplicates_table.filters()` binds by default.
UNFILTERED: dict[str, Any] = {"job_type": None, "queue": None, "since_us": None, "until_us": None}

#: Query name -> the parameters whose answer is kept. The checklist's defaults are those of
#: `queries.forensics.checklist` (and the page's skew tolerance).
KEPT: dict[str, dict[str, Any]] = {
    "store_summary": {},
    "filter_values": {},
    "duplicates": UNFILTERED,
    "lock_overruns": UNFILTERED,
    "split_brains": UNFILTERED,
    "stale_owner_writes": UNFILTERED,
    "durations": UNFILTERED,
    "lint_facts": UNFILTERED,
    "checklist_job_types": UNFILTERED,
    "checklist_outbox": UNFILTERED,
    "checklist_crash_loops": {"since_us": None, "until_us": None},
    "checklist_clock_skew": {**UNFILTERED, "tolerance_ms": SKEW_TOLERANCE_MS},
    "checklist_stampedes": {
        **UNFILTERED,
        "window_us": STAMPEDE_WINDOW_US,
        "min_executions": STAMPEDE_MIN_EXECUTIONS,
    },
}

TABLES: tuple[str, ...] = tuple(f"answer_{name}" for name in KEPT)

#: Kept answers whose rows each belong to one key: an embedded store keeps them in layers
#: like the derived tables (a batch replaces its keys' rows), numbered at read time in
#: their query's order. Table -> that ORDER BY.
LAYERED: dict[str, str] = {"answer_duplicates": "first_us, key"}


def table_for(name: str, params: Mapping[str, Any]) -> str | None:
    """The kept table answering `name` with `params`, or None if that answer is not kept."""
    kept = KEPT.get(name)
    if kept is None or dict(params) != kept:
        return None
    return f"answer_{name}"


#: Kept answers an embedded store adds up from its per-segment counts (derived_segment_counts)
#: instead of reading every event: query -> the file that adds them up.
SEGMENT_COUNTED: dict[str, str] = {
    "store_summary": "kept_store_summary",
    "filter_values": "kept_filter_values",
}


def select(name: str, dialect: str, counted: bool = False) -> str:
    """The query behind a kept answer, its parameters inlined, each row numbered in order
    (`counted`: from the per-segment counts where the query has such a spelling)."""
    source = SEGMENT_COUNTED.get(name, name) if counted else name
    inner = literal(sql_text(source, dialect), KEPT[name])
    return f"SELECT row_number() OVER () AS answer_row, * FROM ({inner}) AS answer"


def build(store: Store, create: Callable[[str, str], None], counted: bool = False) -> None:
    """Compute every kept answer with `create(table, select)` (the derived tables exist;
    with `counted`, the per-segment counts too)."""
    for name in KEPT:
        create(f"answer_{name}", select(name, store.dialect, counted))


def read_sql(table: str, dialect: str) -> str:
    """The statement reading kept table `table` back in order."""
    return render(with_identifiers(sql_text("kept_answer", dialect), table=table), dialect, {})
