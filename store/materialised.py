"""The embedded store's derived tables kept as Parquet, so every process reuses one build.

Files are `<store>/derived/<table>-<snapshot>.parquet`, written under a temporary name,
fsynced and renamed, like segments; files of older snapshots are removed after a grace
period, so a process still reading one a moment ago can finish. A reader whose snapshot
already has every file attaches them as views and builds nothing.

Repeats of an event_uid (a batch sent twice) are collapsed only where they can exist: a
repeat has the same `ts`, so it lives in the same day folder, and a day held in one segment
that was once checked free of repeats needs no work. Checked segments are remembered in
`derived/unique-segments.txt` (segment names are never reused).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import defaultdict
from pathlib import Path

import duckdb

from store.base import SegmentedStore
from store.durable import place
from store.hot_log import is_hot
from store.sql_files import read, with_identifiers

STALE_GRACE_SECONDS = 300.0
_CHECKED = "unique-segments.txt"
_SQL = Path(__file__).parent / "sql"


def _sql(name: str, **identifiers: str) -> str:
    return with_identifiers(read(_SQL, name, "duckdb"), **identifiers)


def folder(store: SegmentedStore) -> Path:
    return store.root / "derived"


def _path(store: SegmentedStore, table: str, snapshot: str) -> Path:
    return folder(store) / f"{table}-{snapshot}.parquet"


def _quoted(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def drop(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop a temp table or view of that name, whichever it is."""
    for statement in ("derived_view_drop", "derived_table_drop"):
        with contextlib.suppress(duckdb.CatalogException):
            con.execute(_sql(statement, table=name))


def attach(
    store: SegmentedStore, con: duckdb.DuckDBPyConnection, tables: tuple[str, ...], snapshot: str
) -> bool:
    """Views over a persisted build of `snapshot`; False (and nothing done) if incomplete."""
    paths = [_path(store, table, snapshot) for table in tables]
    if not all(p.exists() for p in paths):
        return False
    for table, path in zip(tables, paths, strict=True):
        drop(con, table)
        con.execute(f"CREATE TEMP VIEW {table} AS SELECT * FROM read_parquet({_quoted(path)})")
    return True


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


def save(
    store: SegmentedStore, con: duckdb.DuckDBPyConnection, tables: tuple[str, ...], snapshot: str
) -> None:
    """Persist the built tables of `snapshot`; a read-only store just keeps them in memory."""
    if not store.segments():
        return  # an empty store: nothing worth keeping, and no folder made where none was
    target = folder(store)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for table in tables:
            final = _path(store, table, snapshot)
            temporary = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            con.execute(
                f"COPY {table} TO {_quoted(temporary)} (FORMAT parquet, COMPRESSION snappy)"
            )
            place(temporary, final)
        _remove_stale(target, snapshot)
    except OSError:
        return


def _remove_stale(target: Path, snapshot: str) -> None:
    cutoff = time.time() - STALE_GRACE_SECONDS
    for entry in target.glob("*.parquet"):
        if entry.stem.endswith(f"-{snapshot}"):
            continue
        with contextlib.suppress(FileNotFoundError):
            if entry.stat().st_mtime < cutoff:
                entry.unlink()
    for entry in target.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            if entry.stat().st_mtime < cutoff:
                entry.unlink()


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
        return "SELECT * FROM events"
    days = ", ".join(f"DATE '{day}'" for day in dirty)
    return (
        f"SELECT * FROM events WHERE CAST(ts AS DATE) NOT IN ({days}) "
        f"UNION ALL BY NAME "
        f"SELECT DISTINCT ON (event_uid) * FROM events WHERE CAST(ts AS DATE) IN ({days})"
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
