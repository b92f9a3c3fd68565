"""What a full derived build of the embedded store reads, and holding kept answers in memory.

(The kept derived state itself, in layers, is store/derived_state.py's.)

Repeats of an event_uid (a batch sent twice) are collapsed only where they can exist: a
repeat has the same `ts`, so it lives in the same day folder, and a day held in one segment
that was once checked free of repeats needs no work. Checked segments are remembered in
`derived/unique-segments.txt` (segment names are never reused).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import defaultdict
from pathlib import Path

import duckdb

from store.base import SegmentedStore
from store.hot_log import is_hot
from store.sql_files import read, with_identifiers

_CHECKED = "unique-segments.txt"
#: The event_uids a full build found repeated, on the build's connection.
REPEATED = "repeated_event_uids"
_SQL = Path(__file__).parent / "sql"
#: What `unique_events` is where no day may hold repeats: every event, as a view reads it.
ALL_EVENTS = "SELECT * FROM events"


def folder(store: SegmentedStore) -> Path:
    return store.root / "derived"


def _sql(name: str, **identifiers: str) -> str:
    return with_identifiers(read(_SQL, name, "duckdb"), **identifiers)


def hold(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Read an attached table's file into memory, once: a page asks for the same kept
    answer on every visit, and decoding the file each time cost more than the question."""
    attached = con.execute(_sql("derived_attached"), {"name": table}).fetchall()
    if not attached[0][0]:
        return  # already in memory (held, or built in this process)
    held = f"{table}__held"
    con.execute(_sql("derived_hold", held=held, table=table))
    con.execute(_sql("derived_view_drop", table=table))
    con.execute(_sql("derived_hold_rename", held=held, table=table))


def unique_events(store: SegmentedStore, con: duckdb.DuckDBPyConnection) -> str:
    """SQL for `events` without repeats of an event_uid, collapsing only days that may
    hold repeats (several segments, or one not yet checked and found with repeats)."""
    segments = store.segments()
    by_day: dict[str, list[Path]] = defaultdict(list)
    for segment in segments:
        by_day[segment.parent.name.removeprefix("day=")].append(segment)
    checked = _checked(store)
    newly_checked = []
    dirty = []
    for day, files in sorted(by_day.items()):
        if len(files) > 1 or is_hot(files[0]):  # a hot segment is compacted soon: not checked
            dirty.append(day)
        elif files[0].name not in checked:
            if _free_of_repeats(con, files[0]):
                newly_checked.append(files[0].name)
            else:
                dirty.append(day)
    if newly_checked:
        _remember(store, checked | set(newly_checked))
    if not dirty:
        return ALL_EVENTS
    days = ", ".join(f"DATE '{day}'" for day in dirty)
    # Only the repeated uids go through DISTINCT ON, which holds whole rows in memory and
    # cannot spill. They are found first and held apart (an aggregate of one column,
    # which spills), so the rows are split by joins against that small table. Found in a
    # subquery of the same statement, 3M events ran DuckDB out of 122 MB here, on one
    # thread as on two; held apart, the step fits.
    dirty_rows = f"SELECT * FROM events WHERE CAST(ts AS DATE) IN ({days})"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {REPEATED} AS SELECT event_uid "
                f"FROM ({dirty_rows}) GROUP BY event_uid HAVING count(*) > 1")
    return (
        f"SELECT * FROM events WHERE CAST(ts AS DATE) NOT IN ({days}) "
        f"UNION ALL BY NAME "
        f"SELECT * FROM ({dirty_rows}) ANTI JOIN {REPEATED} USING (event_uid) "
        f"UNION ALL BY NAME "
        f"SELECT DISTINCT ON (event_uid) * FROM ({dirty_rows}) SEMI JOIN {REPEATED} "
        f"USING (event_uid)"
    )


def _free_of_repeats(con: duckdb.DuckDBPyConnection, segment: Path) -> bool:
    row = con.execute(_sql("segment_free_of_repeats"), {"file": str(segment)}).fetchone()
    return bool(row and row[0])


def forget_checks(store: SegmentedStore) -> None:
    """Check every segment for repeats again at the next build (a rebuild trusts nothing
    it kept)."""
    with contextlib.suppress(FileNotFoundError):
        (folder(store) / _CHECKED).unlink()


def _checked(store: SegmentedStore) -> set[str]:
    try:
        return set((folder(store) / _CHECKED).read_text().split())
    except OSError:
        return set()


def _remember(store: SegmentedStore, names: set[str]) -> None:
    """Record checked segments (those still present only, so the list does not grow)."""
    present = {p.name for p in store.segments()}
    target = folder(store)
    try:
        target.mkdir(parents=True, exist_ok=True)
        temporary = target / f".{_CHECKED}.{uuid.uuid4().hex[:8]}.tmp"
        temporary.write_text("".join(f"{n}\n" for n in sorted(names & present)))
        os.rename(temporary, target / _CHECKED)
    except OSError:
        return
