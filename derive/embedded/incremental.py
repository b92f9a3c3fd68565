"""Deriving again only what new rows touch: their keys and job_ids, with full history.

Every derived table is made of units that depend on a bounded part of the events:

- an execution, a duplicate run, a key's runs and a lookup entry belong to a key (the
  job's idempotency key, else its job_id), and depend on the events of the key's job_ids
  and the enqueues of the key: unit `key`;
- a job's outbox and enqueue times depend on its own events: unit `job_id`;
- a lock incident depends on every hold of its lock_key: unit `execution_uid`, derived
  again for every execution holding a lock_key a touched execution holds (or held);
- a worker's start or stop is one event: unit `event_uid`;
- a segment's counts depend on its own rows: unit `segment`.

New (or retention-dropped) rows touch their job_ids J and keys; the keys touched are
those, every idempotency key J's events carry (a job whose key changed leaves its old
key) and J themselves (a job without a key is its own key). Three lookups through the
lookup index (store `rows_of`: J's rows, then the rows of the keys beyond J, then the
other jobs those rows name) fetch every job of those keys with all its rows, over
which the same query files as a full build run, in a connection of their own; the rows
of touched units replace theirs in a new layer (derive/embedded/state.py). What a layer
costs follows the rows touched and their keys' history, not the size of the store; the
lock incidents are the exception, as a lock_key's holds are found by a filtered scan of
the (small) executions table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from derive import catalogue
from derive.embedded import state as derived_state
from derive.embedded.build import build_tables, create_on, layered_answers
from derive.library import render
from derive.library import text as sql_text
from derive.rename import inlined
from store import arrow_values, memory
from store.base import SegmentedStore
from store.hot_log import is_hot, read_hot
from store.lineage import Changes, lineage
from store.lookup_index import segment_name
from store.schema import EVENTS_SCHEMA, empty_table
from store.spill import spill_folder
from store.sql_files import with_identifiers

#: What derive_lock_incidents.sql reads of an execution, and the key it belongs to.
HOLDER_COLUMNS = ("execution_uid", "key", "lock_key", "lock_owner", "lock_acquired_us",
                  "lock_valid_until_us", "lock_released_us", "end_us",
                  "lock_expired_while_running")

log = logging.getLogger("dupescope.queries")



def layered() -> dict[str, str]:
    """Everything kept in layers, with its unit column: the derived tables and the kept
    answers of one key a row (a layer replaces all rows of the units it names)."""
    tables = {t.name: str(t.unit) for t in catalogue.kept("duckdb")}
    return {**tables, **dict.fromkeys(catalogue.by_key(), "key")}


@dataclass
class Touched:
    """What new rows touch, and the rows a derivation of it needs."""

    keys: list[str]
    jobs: list[str]
    rows: pa.Table


def _values(*columns: pa.ChunkedArray | pa.Array) -> set[str]:
    found: set[str] = set()
    for column in columns:
        found.update(v for v in pc.unique(pc.drop_null(column)).to_pylist())
    return found


def touched(store: SegmentedStore, rows: pa.Table) -> Touched:
    """The keys and job_ids `rows` touch, and every row of the jobs of those keys."""
    jobs = _values(rows["job_id"])
    own = store.rows_of(sorted(jobs))
    of_jobs = own.filter(pc.is_in(own["job_id"], arrow_values.strings(sorted(jobs))))
    keys = jobs | _values(of_jobs["idempotency_key"], rows["idempotency_key"])
    keyed = store.rows_of(sorted(keys - jobs))
    rest = store.rows_of(sorted(_values(own["job_id"], keyed["job_id"]) - jobs - keys))
    found = _once(pa.concat_tables([own, keyed, rest]).cast(EVENTS_SCHEMA))
    return Touched(sorted(keys), sorted(_values(found["job_id"]) | jobs), found)


def _once(rows: pa.Table) -> pa.Table:
    """Rows without repeats of an event_uid (the same event found by two lookups, or a
    batch resent)."""
    if rows.num_rows == 0:
        return rows
    con = duckdb.connect()
    try:
        con.register("found", rows)
        once = with_identifiers(sql_text("events_once", "duckdb"), rows="found")
        return con.sql(once).to_arrow_table()
    finally:
        con.close()


def connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        config={"temp_directory": spill_folder(), "memory_limit": memory.reader_limit()}
    )
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    return con


def strings(con: duckdb.DuckDBPyConnection, name: str, values: Iterable[str]) -> None:
    """A one-column temp table `name(unit)` of `values` on `con`."""
    con.register(f"{name}_arrow", pa.table({"unit": arrow_values.strings(sorted(set(values)))}))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT unit FROM {name}_arrow")
    con.unregister(f"{name}_arrow")


def segment_rows(paths: list[Path]) -> tuple[list[str], pa.Table | None]:
    """(Parquet files, hot rows) of segments, each row with its `segment` name."""
    parquet = [str(p) for p in paths if not is_hot(p)]
    hot = []
    for path in (p for p in paths if is_hot(p)):
        rows = read_hot(path)
        hot.append(rows.append_column(
            "segment", pa.repeat(arrow_values.string(segment_name(path)), rows.num_rows)))
    return parquet, (pa.concat_tables(hot) if hot else None)


def _sum_merged_counts(
    con: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, paths: list[Path]
) -> set[Path]:
    """Counts of merged segments added up from their inputs' kept counts (`merged_counts`
    on `work`), where the merge dropped no repeat: its rows are its inputs' rows, and
    counting a tier's merge of millions of rows again cost tens of seconds. Returns the
    segments so counted."""
    summed: set[Path] = set()
    parts = []
    for path in paths:
        inputs = None if is_hot(path) else lineage(path)
        if not inputs:
            continue
        names = sorted(inputs)
        counted, present = _ask(con, "merged_segment_inputs", names=names)[0]
        if present != len(names) or int(counted) != pq.read_metadata(path).num_rows:
            continue  # an input not counted, or repeats dropped: count it again
        params = {"segment": segment_name(path), "names": names}
        counts = render(sql_text("merged_segment_counts", "duckdb"), "duckdb", params)
        parts.append(con.sql(counts, params=params).to_arrow_table())
        summed.add(path)
    if parts:
        work.register("merged_counts_arrow", pa.concat_tables(parts))
        work.execute("CREATE OR REPLACE TEMP TABLE merged_counts AS "
                     "SELECT * FROM merged_counts_arrow")
    return summed


def _ask(con: duckdb.DuckDBPyConnection, name: str, **params: object) -> list[tuple[Any, ...]]:
    """The rows of derivation file `name` asked on `con` with `params` bound."""
    return con.execute(render(sql_text(name, "duckdb"), "duckdb", params), params).fetchall()


def count_segments(con: duckdb.DuckDBPyConnection, paths: list[Path]) -> None:
    """`derived_segment_counts` on `con` for the segments `paths`."""
    parquet, hot = segment_rows(paths)
    columns = ", ".join(EVENTS_SCHEMA.names)
    parts = []
    if parquet:
        cold = con.read_parquet(parquet, filename=True, union_by_name=True,
                                hive_partitioning=False)
        cold.project(f"{columns}, parse_filename(parse_dirpath(filename)) || '/' "
                     "|| parse_filename(filename) AS segment"
                     ).create_view("cold_segment_rows", replace=True)
        parts.append("SELECT * FROM cold_segment_rows")
    if hot is not None:
        con.register("hot_segment_rows", hot)
        parts.append(f"SELECT {columns}, segment FROM hot_segment_rows")
    if not parts:
        with_segment = EVENTS_SCHEMA.append(pa.field("segment", pa.string()))
        none = pa.Table.from_batches([], schema=with_segment)
        con.register("hot_segment_rows", none)
        parts.append(f"SELECT {columns}, segment FROM hot_segment_rows")
    con.execute(f"CREATE OR REPLACE TEMP VIEW segment_rows AS {' UNION ALL '.join(parts)}")
    for table in catalogue.kept("duckdb"):
        if table.unit == "segment":
            create_on(con, table.name, sql_text(table.file, "duckdb"))


def derive(
    store: SegmentedStore,
    con: duckdb.DuckDBPyConnection,
    changes: Changes,
    layer: str,
) -> dict[str, int]:
    """Write layer `layer` of what `changes` touch (the state's tables are views on
    `con`); returns its rows per table."""
    work = connection()
    try:
        units: dict[str, set[str]] = {table: set() for table in layered()}
        rows = changes.rows()
        if rows.num_rows:
            started = time.perf_counter()
            found = touched(store, rows)
            log.debug("touched %d keys, %d jobs, %d rows in %.2f s", len(found.keys),
                      len(found.jobs), found.rows.num_rows, time.perf_counter() - started)
            added = pa.concat_tables([t.cast(EVENTS_SCHEMA) for t in changes.added]
                                     or [empty_table()])
            others = _derive_units(con, work, found, rows, added, units)
        else:
            others = set()
            for kept in catalogue.kept("duckdb"):
                if kept.unit != "segment":
                    _empty_like(con, work, kept.name)
        _answers_of(con, work, others, units)
        for table in catalogue.by_key():
            units[table] = units["derived_executions"] | others
        _recount(store, con, work, changes, units)
        return _write_layer(store, work, layer, units)
    finally:
        work.close()


def _recount(store: SegmentedStore, con: duckdb.DuckDBPyConnection,
             work: duckdb.DuckDBPyConnection, changes: Changes,
             units: dict[str, set[str]]) -> None:
    """The counts of the segments `changes` add or grow, as tables of `work`."""
    recount = changes.new_segments + [
        p for p in store.segments() if segment_name(p) in {n for n, _ in changes.grown}
    ]
    summed = _sum_merged_counts(con, work, recount)
    count_segments(work, [p for p in recount if p not in summed])
    if summed:
        work.execute(sql_text("add_merged_counts", "duckdb"))
    counted = {segment_name(p) for p in recount} | set(changes.gone)
    for kept in catalogue.kept("duckdb"):
        if kept.unit == "segment":
            units[kept.name] = counted


def _write_layer(store: SegmentedStore, work: duckdb.DuckDBPyConnection, layer: str,
                 units: dict[str, set[str]]) -> dict[str, int]:
    """Every layered table's rows on `work` and the units they replace, as layer `layer`;
    returns its rows per table."""
    sizes = {}
    for table in layered():
        sizes[table] = derived_state.write(
            work, f"SELECT * FROM {table}", derived_state.rows_path(store, table, layer))
        strings(work, "replaced_units", units[table])
        derived_state.write(work, "SELECT unit FROM replaced_units",
                            derived_state.units_path(store, table, layer))
    return sizes


def _empty_like(con: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection,
                table: str) -> None:
    empty = con.table(table).limit(0).to_arrow_table()
    work.register(f"{table}_empty", empty)
    work.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM {table}_empty")


def _derive_units(
    con: duckdb.DuckDBPyConnection,
    work: duckdb.DuckDBPyConnection,
    found: Touched,
    rows: pa.Table,
    added: pa.Table,
    units: dict[str, set[str]],
) -> set[str]:
    """The touched units' rows as tables of `work`, their unit values in `units`; returns
    the other keys whose lock incidents were derived again (see `_relock`)."""
    work.register("touched_rows", found.rows)
    work.execute("CREATE OR REPLACE TEMP VIEW unique_events AS SELECT * FROM touched_rows")
    work.execute("CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM touched_rows")
    build_tables(work)
    strings(con, "touched_keys", found.keys)
    _prune(work, {"key": found.keys, "job_id": found.jobs}, units)
    # Worker lifecycle events carry no job: the added rows' own, once each (and none of
    # the rows retention dropped).
    work.register("added_rows", added)
    create_on(work, "unique_events",
              with_identifiers(sql_text("events_once", "duckdb"), rows="added_rows"), view=True)
    for table in catalogue.kept("duckdb"):
        if table.unit == "event_uid":
            create_on(work, table.name, sql_text(table.file, "duckdb"))
            units[table.name] = _values(rows["event_uid"])
    return _relock(con, work, found, rows, units)


def _prune(work: duckdb.DuckDBPyConnection, touched: dict[str, list[str]],
           units: dict[str, set[str]]) -> None:
    """Keep only the touched units' rows of the tables a batch builds over its rows:
    those whose unit is a key or a job (catalogue.PRUNED_UNITS)."""
    slots = catalogue.TOUCHED["duckdb"]
    for unit in catalogue.PRUNED_UNITS:
        strings(work, slots[unit], touched[unit])
    for table in catalogue.kept("duckdb"):
        if table.unit in catalogue.PRUNED_UNITS:
            with_slots = sql_text("derive_prune", "duckdb")
            work.execute(with_identifiers(with_slots, table=table.name, unit=table.unit,
                                          units=slots[table.unit]))
            units[table.name] = set(touched[table.unit])


def _relock(con: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection,
            found: Touched, rows: pa.Table, units: dict[str, set[str]]) -> set[str]:
    """Lock incidents again for the new executions and for every kept execution whose
    incidents they can change: a holder of a lock_key the touched keys' executions hold
    now or held before, whose span meets theirs (`lock_holders_in_reach.sql`); returns
    the keys of those holders that are not touched keys themselves.

    What the touched keys' executions held before is read from the events, not from the
    kept executions: their jobs' rows are all in `found` (and those retention dropped in
    `rows`), so every lock_key they named is among those rows' lock_keys, and every
    execution of theirs that is gone was started by a dropped `deliver` (its uid, or its
    execution_id). The kept executions of those lock_keys give the spans they had.

    A lock_key is shared by every job of its resource: over a long history, thousands of
    executions hold it. Only those whose time meets the batch's are derived again, and
    only those whose span ends late enough to meet them are read (`kept_holders`), so a
    batch costs the holders it reaches, not every holder ever."""
    new = work.table("derived_executions").select(*HOLDER_COLUMNS).to_arrow_table()
    locks = _values(new["lock_key"], found.rows["lock_key"], rows["lock_key"])
    delivered = rows.filter(pc.equal(rows["event"], arrow_values.string("deliver")))
    gone = _values(delivered["event_uid"], rows["execution_id"])
    strings(con, "touched_locks", locks)
    # A kept execution of a touched key ends no earlier than its last event, one of
    # `found`'s or `rows`' (none ends before the earliest of them).
    since = min(_earliest_start(new), _earliest_event_us(found.rows),
                _earliest_event_us(rows))
    kept = kept_holders(con, since, None, new.schema)
    work.register("touched_holders_new", new)
    while True:
        was_touched = pc.or_(
            pc.is_in(kept["key"], arrow_values.strings(sorted(found.keys))),
            pc.is_in(kept["execution_uid"], arrow_values.strings(sorted(gone))),
        )
        old = kept.filter(was_touched)
        work.register("touched_holders_old", old)
        work.register("lock_holder_candidates", kept.filter(pc.invert(was_touched)))
        involved = work.sql(sql_text("lock_holders_in_reach", "duckdb")).to_arrow_table()
        reached = involved.filter(involved["reached"])
        # What the reached holders' incidents are derived from meets a reached or touched
        # span: it ends no earlier than the earliest of those starts. One that started
        # before `since` calls for the holders that ended between the two.
        reach = min(_earliest_start(old), _earliest_start(reached))
        if reach >= since:
            break
        kept = pa.concat_tables([kept, kept_holders(con, reach, since, new.schema)])
        since = reach
    holders = pa.concat_tables([new, involved.select(new.schema.names).cast(new.schema)])
    work.register("lock_holders", holders)
    work.execute("CREATE OR REPLACE TEMP TABLE derived_executions_all AS "
                 "SELECT * FROM lock_holders")
    work.execute("ALTER TABLE derived_executions RENAME TO derived_executions_touched")
    work.execute("ALTER TABLE derived_executions_all RENAME TO derived_executions")
    rederived = _values(new["execution_uid"], reached["execution_uid"])
    strings(work, "rederived_holders", rederived)
    rederived_only = with_identifiers(sql_text("rederived_lock_incidents", "duckdb"),
                                      holders="rederived_holders")
    create_on(work, "derived_lock_incidents", inlined(
        rederived_only, "duckdb",
        {"lock_incidents": sql_text("derive_lock_incidents", "duckdb")}))
    work.execute("DROP TABLE derived_executions")
    work.execute("ALTER TABLE derived_executions_touched RENAME TO derived_executions")
    for name in ("touched_holders_new", "touched_holders_old", "lock_holder_candidates",
                 "lock_holders"):
        work.unregister(name)
    units["derived_lock_incidents"] = rederived | gone
    return _values(reached["key"])


#: The lock_span fragment's bounds: a span reaching back, or on, forever.
_NEVER = -9223372036854775807
_FOREVER = 9223372036854775807


def kept_holders(con: duckdb.DuckDBPyConnection, since: int, until: int | None,
                  schema: pa.Schema) -> pa.Table:
    """The kept holders of the touched lock_keys whose span ends in [since, until) (from
    `since` on, for `until` None).

    Only the columns the incidents read, and only the row groups that end late enough:
    the holders of a lock_key are spread over the whole history of the kept executions,
    and reading them all decoded every row group of it."""
    return con.sql(sql_text("kept_lock_holders", "duckdb"),
                   params={"since": since, "until": until}).to_arrow_table().cast(schema)


def _earliest_start(holders: pa.Table) -> int:
    """The earliest start of these executions' spans on their lock_keys
    (fragments/lock_span.sql); `_FOREVER` when none holds one."""
    held = holders.filter(pc.is_valid(holders["lock_key"]))
    if held.num_rows == 0:
        return _FOREVER
    starts = pc.min_element_wise(held["lock_acquired_us"], held["lock_valid_until_us"])
    if starts.null_count:
        return _NEVER
    return int(pc.min(starts).as_py())


def _earliest_event_us(rows: pa.Table) -> int:
    """The time of the earliest of `rows`, in microseconds (`_FOREVER` for none)."""
    if rows.num_rows == 0:
        return _FOREVER
    ts = rows["ts"]
    micros = pc.cast(ts, pa.timestamp("us", getattr(ts.type, "tz", None)))
    return int(pc.min(micros.cast(pa.int64())).as_py())


def _answers_of(
    con: duckdb.DuckDBPyConnection,
    work: duckdb.DuckDBPyConnection,
    others: set[str],
    units: dict[str, set[str]],
) -> None:
    """The kept answers of one key a row for the touched keys and for `others`, keys a
    batch did not touch whose lock incidents it derived again: a key B that takes a lock
    inside the gap of key A's expired lock makes A's overrun overlapped, and A's row of
    the duplicates answer must say so. The answers read `others`' duplicate runs as kept
    and their lock incidents as kept, but for those derived again (of the holders)."""
    if not others:
        layered_answers(work)
        return
    started = time.perf_counter()
    strings(con, "other_keys", others)
    strings(con, "holder_units", units["derived_lock_incidents"])
    runs = con.sql(sql_text("kept_runs_of_other_keys", "duckdb")).to_arrow_table()
    strings(con, "other_runs", _values(runs["execution_uid"]))
    incidents = con.sql(sql_text("kept_incidents_of_other_runs", "duckdb")).to_arrow_table()
    log.debug("answers of %d other keys: %d runs, %d incidents read in %.2f s", len(others),
              runs.num_rows, incidents.num_rows, time.perf_counter() - started)
    touched = {"derived_duplicate_runs": runs, "derived_lock_incidents": incidents}
    for table, kept in touched.items():
        work.register(f"{table}_kept", kept)
        work.execute(f"ALTER TABLE {table} RENAME TO {table}_touched")
        create_on(work, table, with_identifiers(sql_text("touched_and_kept", "duckdb"),
                                                touched=f"{table}_touched", kept=f"{table}_kept"))
    layered_answers(work)
    for table in touched:
        work.execute(f"DROP TABLE {table}")
        work.execute(f"ALTER TABLE {table}_touched RENAME TO {table}")
        work.unregister(f"{table}_kept")
