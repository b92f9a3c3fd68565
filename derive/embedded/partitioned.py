"""A full build of more events than its memory holds: one part of the keys at a time.

Every derived table but the lock incidents is made of units that live in one key's jobs
(derive/embedded/incremental.py lists them): an execution, a run, a lookup entry, a job,
a worker's start or stop. So the events are written out once, split into parts by the
hash of their key (derive/sql/duckdb/build_parts.sql), each part's tables are built from
its own rows by the same query files as a build in one piece, and appended. The lock
incidents, whose holders come from many keys (catalogue.CROSS_KEY_UNITS), are derived
once over every execution at the end. A part holds its share of the events' facts at a
time, where a build in one piece held, and spilled, the facts of every event at once.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import duckdb

from derive import catalogue
from derive.embedded import build
from derive.embedded import state as derived_state
from derive.embedded.build import create_on, retype_hugeints
from derive.library import text
from derive.progress import BuildSteps
from derive.rename import renamed
from store import materialised, memory
from store.spill import spill_folder
from store.sql_files import literal

log = logging.getLogger("dupescope.queries")

#: What one event costs a build in memory, in bytes (its facts and the tables over them):
#: a part holds as many events as the build's DuckDB share over this.
EVENT_BUILD_BYTES = 400
#: Fewer events than this per part cost more in passes than they save.
MIN_PART_EVENTS = 100_000
#: Rows the split holds per part before it writes them out.
FLUSH_ROWS = 16_384
#: What a part's query files read instead of the store's relations.
_PART_SOURCES = {"unique_events": "build_part_events", "events": "build_part_enqueues"}


def parts_for(events: int) -> int:
    """How many parts a build of `events` events is split into under the budget (1: it
    is built in one piece)."""
    share = int(memory.budget() * memory.READER_SHARE)
    per_part = max(MIN_PART_EVENTS, share // EVENT_BUILD_BYTES)
    return max(1, -(-events // per_part))


def event_count(con: duckdb.DuckDBPyConnection) -> int:
    """The events a build on `con` reads (repeats counted)."""
    row = con.execute(text("events_count", "duckdb")).fetchone()
    return int(row[0]) if row else 0


def build_tables(con: duckdb.DuckDBPyConnection, parts: int,
                 steps: BuildSteps | None = None) -> None:
    """Every chained derived table on `con`, as `build.build_tables` makes them from
    `events` with repeats of an event_uid collapsed, built in `parts` parts of the keys
    (each part collapses its own repeats: an event's repeats are in its part), each
    stage told to `steps`."""
    cross = [t for t in catalogue.chained("duckdb") if t.unit in catalogue.CROSS_KEY_UNITS]
    steps = steps or BuildSteps(None)
    steps.expect(1 + parts + 1 + len(cross))
    folder = Path(spill_folder())
    try:
        started = time.perf_counter()
        steps.begin(f"events split into {parts} parts")
        # Rows a part's writer holds before it writes them: the default (524288 rows a
        # part) is more than a small budget holds for a few parts at once.
        con.execute("SET partitioned_write_flush_threshold = $rows",
                    {"rows": FLUSH_ROWS})
        con.execute(f"COPY ({text('build_parts', 'duckdb')}) TO {literal(folder)} "
                    f"(FORMAT parquet, PARTITION_BY (build_part))", {"parts": parts})
        log.info("split the events into %d parts in %.1f s", parts,
                 time.perf_counter() - started)
        kept = [t for t in catalogue.chained("duckdb")
                if t.unit is not None and t.unit not in catalogue.CROSS_KEY_UNITS]
        appended: set[str] = set()
        for part in range(parts):
            steps.begin(f"part {part + 1} of {parts}")
            files = sorted((folder / f"build_part={part}").glob("*.parquet"))
            if files:
                _build_part(con, files, kept, appended)
                log.info("built part %d of %d in %.1f s", part + 1, parts,
                         time.perf_counter() - started)
        if not appended:  # no events at all: the tables as a build of nothing makes them
            create_on(con, "unique_events", materialised.ALL_EVENTS, view=True)
            build.build_tables(con)
            return
        steps.begin("parts gathered")
        _gather(con, kept)
    finally:
        con.execute("RESET partitioned_write_flush_threshold")
        for name in ("build_part_enqueues", "build_part_events", "build_part_repeats",
                     "build_part_rows"):
            derived_state.drop(con, name)
        shutil.rmtree(folder, ignore_errors=True)
    for table in cross:
        steps.begin(table.name)
        create_on(con, table.name, text(table.file, "duckdb"))
        retype_hugeints(con, table.name, "BIGINT")


def _build_part(con: duckdb.DuckDBPyConnection, files: list[Path],
                kept: list[catalogue.Table], appended: set[str]) -> None:
    """One part's tables from its own rows, appended to `<table>__parts`."""
    listed = ", ".join(literal(f) for f in files)
    con.execute("CREATE OR REPLACE TEMP VIEW build_part_rows AS SELECT * FROM "
                f"read_parquet([{listed}], hive_partitioning = false)")
    create_on(con, "build_part_repeats", text("build_part_repeats", "duckdb"))
    create_on(con, "build_part_events", text("build_part_events", "duckdb"))
    create_on(con, "build_part_enqueues", text("build_part_enqueues", "duckdb"), view=True)
    create_on(con, "event_facts", _of_part("event_facts"))
    for table in catalogue.chained("duckdb"):
        if table.unit in catalogue.CROSS_KEY_UNITS:
            continue
        create_on(con, table.name, _of_part(table.file))
        retype_hugeints(con, table.name, "BIGINT")
    for table in kept:
        if table.name in appended:
            con.execute(f"INSERT INTO {table.name}__parts SELECT * FROM {table.name}")
        else:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {table.name}__parts AS "
                        f"SELECT * FROM {table.name}")
            appended.add(table.name)
    for table in catalogue.chained("duckdb"):
        if table.unit is None:
            con.execute(f"DROP TABLE IF EXISTS {table.name}")
    con.execute("DROP TABLE IF EXISTS event_facts")


def _of_part(name: str) -> str:
    """Query file `name` reading one part's rows."""
    return renamed(text(name, "duckdb"), "duckdb", {}, sources=_PART_SOURCES)


def _gather(con: duckdb.DuckDBPyConnection, kept: list[catalogue.Table]) -> None:
    """Each table of every part under its own name (a table a query file sorts, sorted
    again: the parts follow one another, not its order)."""
    for table in kept:
        whole = f"SELECT * FROM {table.name}__parts"
        if table.sorted_by_query and table.order:
            whole += f" ORDER BY {table.order}"
        create_on(con, table.name, whole)
        con.execute(f"DROP TABLE {table.name}__parts")
