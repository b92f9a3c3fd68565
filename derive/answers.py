"""Answers kept with the derived tables: what a page asks on arrival, computed per snapshot.

Every dashboard page opens without filters, and its questions then have one answer per
store snapshot. Those answers (derive/catalogue.py `ANSWERS`) are computed when the
derived tables are built and kept beside them (`answer_<query>` tables, persisted like the
rest on the embedded store), so a page reads a few small tables instead of aggregating a
million executions. A question asked with any filter set runs its query as before.

Each kept table carries `answer_row`, the row's place in the query's own ORDER BY, so the
kept answer comes back in the same order on every engine.
"""

from __future__ import annotations

from collections.abc import Callable

from derive import catalogue
from derive.library import literal, render, text
from derive.rename import inlined
from store.sql_files import with_identifiers


def select(name: str, dialect: str, counted: bool = False) -> str:
    """The query behind a kept answer, its parameters inlined, each row numbered in order
    (`counted`: from the per-segment counts where the query has such a spelling)."""
    kept = catalogue.answer(name)
    source = (kept.counted or name) if counted else name
    inner = literal(text(source, dialect), dict(kept.params))
    return inlined(text("numbered_answer", dialect), dialect, {"answer": inner})


def build(dialect: str, create: Callable[[str, str], None], counted: bool = False) -> None:
    """Compute every kept answer with `create(table, select)` (the derived tables exist;
    with `counted`, the per-segment counts too)."""
    for kept in catalogue.ANSWERS:
        create(kept.table, select(kept.name, dialect, counted))


def read_sql(table: str, dialect: str) -> str:
    """The statement reading kept table `table` back in order."""
    return render(with_identifiers(text("kept_answer", dialect), table=table), dialect, {})
