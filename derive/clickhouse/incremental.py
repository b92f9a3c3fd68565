"""Deriving on ClickHouse and chDB only what new rows touch, as on the embedded store.

`events` records when each row was inserted (`ingested_at`, with a minmax index), and the
derived status (store/clickhouse_derived.py) the newest insert time read (`high`). A
derivation reads the rows inserted since, finds the units they touch as the embedded store
does (queries/incremental.py: their keys and job_ids, with every row of the jobs of those
keys: the pairs of key and job_id with rows from before the read, which the id index
`events_ids` names, through the sort key, and the others from the read), runs the same query files
over those rows in tables of its own (`derive_work_*`), and writes the touched units'
rows under a new version. What it costs follows the rows touched and their keys' history,
not the size of `events`; a touched lock_key's holders among the other keys are found
through the kept executions' lock_key projection (`LOOKUPS`), and read by their keys.

Three things keep this exact:

- rows may become visible slightly after rows inserted later (inserts in flight), so the
  window before `high` is read again each time and derived again when its checksum moved;
- retention drops whole days (`ttl_only_drop_parts`): a day gone from `events` means a
  build from nothing, as does a batch larger than the executions twice over (a refilled
  `events` of the OpenTelemetry exporter's tables, a first bulk load);
- one process derives at a time (the store's derivation lock), and each writes its rows
  under the server's clock, so the newest derivation of a unit wins however they
  interleave; one killed halfway leaves its status unmoved, and the next derives the same
  units again.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
import weakref
from typing import Any

import pyarrow as pa

from derive.clickhouse import kept
from derive.embedded import incremental
from queries import answers
from queries.loader import literal, render, sql_text
from store.clickhouse import ClickHouseEngine
from store.sql_files import with_identifiers

log = logging.getLogger("dupescope.queries")

#: Prefix of the tables a derivation works in (one derivation at a time: fixed names).
WORK = "derive_work_"

#: Seconds of inserts read again after `high` each time (inserts in flight).
WINDOW_SECONDS = 10

#: Engines of the work tables. A build from nothing works over every event, on disk; a
#: batch's work tables hold its units' rows, and kept in memory they spare each of its
#: hundred statements the writing of a part (a fifth of a small batch's absorb on chDB).
#: The rows read (`derive_work_read`, `derive_work_batch`) stay on disk: a refill of
#: `events` can be every row there is, which is then built from nothing.
LARGE = "MergeTree ORDER BY tuple()"
SMALL = "Memory"

#: A batch of more rows than this, and over twice the executions, is built from nothing.
LARGE_BATCH_ROWS = 500_000

#: Columns a kept table's units are also looked up by, beside the unit itself: the
#: holders of the touched lock_keys are found through it (`derive_work_lock_candidates`).
LOOKUPS = {"derived_executions": "lock_key"}

#: The work table listing each kept derived table's touched units (its unit column is
#: queries/incremental.py's, as on the embedded store).
_TOUCHED = {
    "derived_executions": "derive_work_keys",
    "derived_lock_incidents": "derive_work_holder_units",
    "derived_duplicate_runs": "derive_work_keys",
    "derived_jobs": "derive_work_all_jobs",
    "derived_lifecycle": "derive_work_batch_events",
    "derived_key_runs": "derive_work_keys",
    "derived_lookup": "derive_work_keys",
    "derived_redeliveries": "derive_work_keys",
}

#: Each kept derived table's unit column, and the work table listing its touched units.
UNITS: dict[str, tuple[str, str]] = {
    table: (unit, _TOUCHED[table])
    for table, unit in incremental.UNITS.items() if table in _TOUCHED and unit is not None
}

#: Kept answers of one key a row (queries/answers.py LAYERED), kept by key like the
#: derived tables: a derivation writes again the rows of the keys it touched and of the
#: other holders of their lock_keys (`derive_work_answer_keys`), instead of every reader
#: computing the answer again from all the derived rows each generation. Table -> query.
BY_KEY = {"answer_duplicates": "duplicates"}

#: ClickHouse fills unmatched LEFT JOIN columns with type defaults and lets an alias
#: shadow a column of the same name unless told otherwise; the query library is written
#: for standard SQL's NULLs and name resolution.
SETTINGS = (
    " SETTINGS join_use_nulls = 1, prefer_column_name_to_alias = 1,"
    " aggregate_functions_null_for_empty = 1"
)

_SOURCE = re.compile(r"\b(FROM|JOIN)\s+events(\s+FINAL)?\b")
_NAMES = re.compile(r"\b(unique_events|event_facts|derived_[a-z_]+)\b")

Tables = tuple[tuple[str, str], ...]


def work_sql(text: str) -> str:
    """A query file as a derivation runs it: reading `derive_work_events` for `events`
    and the work tables for the derived ones."""
    text = _SOURCE.sub(lambda m: f"{m.group(1)} {WORK}events", text)
    return _NAMES.sub(lambda m: WORK + m.group(1), text)


def _run(store: ClickHouseEngine, name: str, **params: Any) -> None:
    text = sql_text(name, "clickhouse")
    store.command(render(text, "clickhouse", params), params)


def _ask(store: ClickHouseEngine, name: str, **params: Any) -> dict[str, Any]:
    text = sql_text(name, "clickhouse")
    rows: list[dict[str, Any]] = store.arrow(render(text, "clickhouse", params),
                                             params).to_pylist()
    return rows[0]


def _named(name: str, **identifiers: str) -> str:
    return with_identifiers(sql_text(name, "clickhouse"), **identifiers)


def ensure(store: ClickHouseEngine, tables: Tables) -> kept.Status:
    """Bring the derived tables up to date with `events`; returns where they stand."""
    status = kept.status(store)
    if status is not None and _lacks_evidence(store):
        return _locked_build(store, tables, always=True)
    if status is not None and status.format in kept.UPGRADABLE:
        status = _upgrade(store)
    if status is None or status.format != kept.FORMAT or _days_gone(store, status):
        return _locked_build(store, tables)
    if not _moved(store, status):
        return status
    with store.derivation_lock():
        status = kept.status(store)  # another process may have derived meanwhile
        if status is None or status.format != kept.FORMAT or _days_gone(store, status):
            return build(store, tables)
        if not _moved(store, status):
            return status
        return _absorb(store, tables, status)


def _upgrade(store: ClickHouseEngine) -> kept.Status | None:
    """Kept tables of an earlier layout brought to this one in place: the lookup
    projections added and filled, the answers kept by key computed from the kept rows
    (seconds, where a build from nothing takes a quarter of an hour at 100M events). A
    process killed halfway leaves it to the next one."""
    with store.derivation_lock():
        status = kept.status(store)
        if status is None or status.format not in kept.UPGRADABLE:
            return status
        version = _version(store, status)
        if status.format < 2:
            for table, lookup in LOOKUPS.items():
                kept.add_lookup(store, kept.rows_table(table), UNITS[table][0], lookup)
        for table in BY_KEY:
            kept.drop_table(store, table)  # the whole answer an earlier layout kept
        _keep_answers(store, "derived_duplicate_runs", "derived_lock_incidents", version)
        _drop_work(store, ())
        # A new row version, so this status is the newest (the rows keep theirs).
        upgraded = dataclasses.replace(status, format=kept.FORMAT, version=version)
        kept.set_status(store, upgraded)
        return upgraded


#: A column every kept layout since outcomes could be `unknown` has: tables kept without
#: it cannot tell an absorbed duplicate from one whose effect no run reported, and are
#: built again from nothing (an in-place upgrade would need every run's events again).
EVIDENCE_COLUMN = ("derived_duplicate_runs_rows", "had_effect_evidence")


#: Stores found to keep the column: asked once a process, not at every derivation.
_HAS_EVIDENCE: weakref.WeakSet[ClickHouseEngine] = weakref.WeakSet()


def _lacks_evidence(store: ClickHouseEngine) -> bool:
    if store in _HAS_EVIDENCE:
        return False
    table, column = EVIDENCE_COLUMN
    names = [name for name, _ in kept.columns(store, table)]
    if column in names:
        _HAS_EVIDENCE.add(store)
    return bool(names) and column not in names


def _moved(store: ClickHouseEngine, status: kept.Status) -> bool:
    poll = _ask(store, "derive_poll", high=status.high, window=WINDOW_SECONDS)
    return bool(poll["new_rows"]) or poll["recent"] != status.recent


def _days_gone(store: ClickHouseEngine, status: kept.Status) -> bool:
    return bool(set(status.partitions) - set(kept.partitions(store)))


def _locked_build(store: ClickHouseEngine, tables: Tables, always: bool = False) -> kept.Status:
    with store.derivation_lock():
        status = kept.status(store)
        if always and _lacks_evidence(store):
            return build(store, tables)
        if (status is not None and status.format == kept.FORMAT
                and not _days_gone(store, status) and not _moved(store, status)):
            return status  # another process built it meanwhile
        return build(store, tables)


def rebuild(store: ClickHouseEngine, tables: Tables) -> kept.Status:
    """A build from nothing, whatever was derived before (`dupescope rebuild`)."""
    with store.derivation_lock():
        return build(store, tables)


def _version(store: ClickHouseEngine, status: kept.Status | None) -> int:
    """A row version newer than any written before (the server's clock, or one more)."""
    now = kept.now_us(store)
    return max(now, status.version + 1) if status is not None else now


def build(store: ClickHouseEngine, tables: Tables) -> kept.Status:
    """Every derived table from nothing, each swapped in whole. Call with the lock held."""
    started = time.perf_counter()
    previous = kept.status(store)
    version = _version(store, previous)
    days = kept.partitions(store)
    summary = _ask(store, "derive_events_summary", window=WINDOW_SECONDS)
    store.command(_named("derive_work_everything"))
    _chain(store, tables, "derive_work_everything")
    for table, (unit, _) in UNITS.items():
        built = kept.rows_table(table) + "_next"
        kept.create_rows_table(store, built, kept.columns(store, WORK + table), unit,
                               LOOKUPS.get(table))
        store.command(render(_named("derive_rows_fill", rows=built, unit=unit,
                                    work=WORK + table), "clickhouse", {"version": version}),
                      {"version": version})
        kept.replace_table(store, kept.rows_table(table), built)
        kept.create_view(store, table)
    _keep_answers(store, WORK + "derived_duplicate_runs", WORK + "derived_lock_incidents",
                  version)
    _drop_work(store, tables)
    status = kept.Status(kept.FORMAT, uuid.uuid4().hex, 0, version,
                         summary["high"] or "1970-01-01 00:00:00", summary["recent"], days)
    kept.set_status(store, status)
    log.debug("derived tables built from nothing in %.2f s", time.perf_counter() - started)
    return status


def _answer_sql(query: str, runs: str, incidents: str) -> str:
    """Kept answer `query` unfiltered, over the duplicate runs and lock incidents named."""
    text = literal(sql_text(query, "clickhouse"), answers.KEPT[query])
    text = re.sub(r"\bderived_duplicate_runs\b", runs, text)
    return re.sub(r"\bderived_lock_incidents\b", incidents, text)


def _keep_answers(store: ClickHouseEngine, runs: str, incidents: str, version: int) -> None:
    """The answers kept by key (`BY_KEY`) from nothing, over every duplicate run and lock
    incident (the tables named), each swapped in whole."""
    for table, query in BY_KEY.items():
        _work_table(store, WORK + table, _answer_sql(query, runs, incidents))
        built = kept.rows_table(table) + "_next"
        kept.create_rows_table(store, built, kept.columns(store, WORK + table), "key")
        store.command(render(_named("derive_rows_fill", rows=built, unit="key",
                                    work=WORK + table), "clickhouse", {"version": version}),
                      {"version": version})
        kept.replace_table(store, kept.rows_table(table), built)
        kept.create_view(store, table, numbered=answers.LAYERED[table])


def _chain(store: ClickHouseEngine, tables: Tables, source: str, engine: str = LARGE) -> None:
    """Every derived table as a work table of `engine`, over the events of `source`."""
    store.command(_named("derive_work_source", source=source))
    store.command(f"CREATE OR REPLACE VIEW {WORK}unique_events AS "
                  f"{work_sql(sql_text('unique_events', 'clickhouse'))}")
    store.command(f"CREATE OR REPLACE VIEW {WORK}event_facts AS "
                  f"{work_sql(sql_text('event_facts', 'clickhouse'))}")
    for table, name in tables:
        _work_table(store, WORK + table, work_sql(sql_text(name, "clickhouse")), engine)


def _work_table(store: ClickHouseEngine, name: str, select: str, engine: str = LARGE) -> None:
    started = time.perf_counter()
    store.command(f"CREATE OR REPLACE TABLE {name} ENGINE = {engine} AS {select}{SETTINGS}")
    log.debug("derived %s in %.2f s", name, time.perf_counter() - started)


def _drop_work(store: ClickHouseEngine, tables: Tables) -> None:
    names = [t for t, _ in tables] + [
        "events", "unique_events", "event_facts", "everything", "read", "batch", "jobs",
        "older", "own", "keys", "keyed", "rest", "found", "keyed_units", "rest_units",
        "all_jobs", "batch_events", "locks", "lock_candidates", "lock_spans", "lock_reached",
        "holders", "holder_units", "answer_keys",
        "answer_runs", "answer_incidents", *BY_KEY]
    for name in names:
        store.command(f"DROP TABLE IF EXISTS {WORK}{name}")


def _absorb(store: ClickHouseEngine, tables: Tables, status: kept.Status) -> kept.Status:
    """The units the rows inserted since `status` touch, derived again under a new
    version. Call with the lock held."""
    started = time.perf_counter()
    version = _version(store, status)
    days = kept.partitions(store)
    _run(store, "derive_work_read", high=status.high, window=WINDOW_SECONDS)
    summary = _ask(store, "derive_work_read_summary", high=status.high,
                   window=WINDOW_SECONDS)
    # The window before `high` was derived as it was then; again only if it moved.
    back = 0 if summary["before"] == status.recent else WINDOW_SECONDS
    _run(store, "derive_work_batch", since=status.high, back=back)
    batch_rows = int(_ask(store, "derive_work_batch_size")["batch_rows"])
    # Only a large batch is weighed against the executions (a count of every kept row).
    if batch_rows > LARGE_BATCH_ROWS and batch_rows > 2 * int(
        _ask(store, "derived_executions_count")["executions"]
    ):
        return build(store, tables)
    _run(store, "derive_work_jobs")
    _history(store, "derive_work_jobs", WORK + "own", status)
    _run(store, "derive_work_keys")
    _run(store, "derive_work_keyed_units")
    _history(store, "derive_work_keyed_units", WORK + "keyed", status)
    _run(store, "derive_work_rest_units")
    _history(store, "derive_work_rest_units", WORK + "rest", status)
    for step in ("derive_work_found", "derive_work_all_jobs", "derive_work_batch_events"):
        _run(store, step)
    _chain(store, tables, WORK + "found", SMALL)
    _relock(store)
    # Worker lifecycle events carry no job: the new rows' own, once each.
    store.command(_named("derive_work_source", source=WORK + "batch"))
    _work_table(store, WORK + "derived_lifecycle",
                work_sql(sql_text("derive_lifecycle", "clickhouse")), SMALL)
    for step in ("derive_work_answer_keys", "derive_work_answer_runs",
                 "derive_work_answer_incidents"):
        _run(store, step)
    for table, query in BY_KEY.items():
        _work_table(store, WORK + table, _answer_sql(
            query, WORK + "answer_runs", WORK + "answer_incidents"), SMALL)
    by_key = dict.fromkeys(BY_KEY, ("key", WORK + "answer_keys"))
    for table, (unit, units) in {**UNITS, **by_key}.items():
        params = {"version": version}
        names = {"rows": kept.rows_table(table), "unit": unit, "work": WORK + table,
                 "units": units}
        for statement in ("derive_rows_write", "derive_rows_tombstones"):
            store.command(render(_named(statement, **names), "clickhouse", params), params)
    _drop_work(store, tables)
    grown = kept.Status(kept.FORMAT, status.epoch, status.generation + 1, version,
                        summary["high"] or status.high, summary["recent"], days)
    kept.set_status(store, grown)
    log.debug("absorbed %d new rows in %.2f s", batch_rows, time.perf_counter() - started)
    return grown


def _history(store: ClickHouseEngine, units: str, target: str, status: kept.Status) -> None:
    """Every row of the listed units into `target`, however old: the history from before
    the read through the id index (`events_ids`), the rest from the read."""
    params = {"high": status.high, "window": WINDOW_SECONDS}
    text = _named("derive_work_older", units=units)
    store.command(render(text, "clickhouse", params), params)
    store.command(_named("derive_work_history", units=units, target=target))


def _relock(store: ClickHouseEngine) -> None:
    """Lock incidents again for the touched keys' executions and for every kept holder of
    a lock_key they hold now or held before whose span meets theirs (see
    queries/incremental.py): a batch costs the holders it reaches, not every holder the
    lock_key ever had."""
    for step in ("derive_work_locks", "derive_work_lock_candidates", "derive_work_lock_spans",
                 "derive_work_lock_reached", "derive_work_holders",
                 "derive_work_holder_units"):
        _run(store, step)
    incidents = sql_text("derive_lock_incidents", "clickhouse")
    incidents = re.sub(r"\bderived_executions\b", WORK + "holders", incidents)
    _work_table(store, WORK + "derived_lock_incidents", work_sql(
        f"SELECT * FROM ({incidents}) "
        f"WHERE execution_uid IN (SELECT unit FROM {WORK}holder_units)"), SMALL)


def answer(store: ClickHouseEngine, table: str, status: kept.Status) -> None:
    """Kept answer `table` as of `status`: computed from the derived tables the first
    time it is asked for in a generation, then read as kept."""
    stamp = (status.epoch, status.generation)
    if table in BY_KEY or kept.answer_stamps(store).get(table) == stamp:
        return
    name = table.removeprefix("answer_")
    started = time.perf_counter()
    store.command(f"CREATE OR REPLACE TABLE {table} ENGINE = MergeTree ORDER BY tuple() "
                  f"AS {answers.select(name, 'clickhouse')}{SETTINGS}")
    kept.stamp_answer(store, table, *stamp)
    log.debug("kept answer %s computed in %.2f s", table, time.perf_counter() - started)


def answer_changes(store: ClickHouseEngine, table: str,
                   version: int) -> tuple[list[str], pa.Table]:
    """The keys whose rows of kept answer `table` (one of `BY_KEY`) derivations wrote
    since row version `version`, and those keys' rows now."""
    rows = kept.rows_table(table)
    params: dict[str, Any] = {"version": version}
    text = with_identifiers(sql_text("kept_answer_keys_since", "clickhouse"), table=rows)
    keys = sorted(store.arrow(render(text, "clickhouse", params), params)["unit"].to_pylist())
    params = {"keys": keys}
    text = with_identifiers(sql_text("kept_answer_of_keys", "clickhouse"), table=rows)
    return keys, store.arrow(render(text, "clickhouse", params), params)


def touched_since(store: ClickHouseEngine, version: int) -> tuple[set[str], set[str]]:
    """(keys, executions) whose executions or lock incidents derivations wrote since row
    version `version`."""
    found = []
    for name in ("touched_keys_since", "touched_executions_since"):
        text = render(sql_text(name, "clickhouse"), "clickhouse", {"version": version})
        found.append(set(store.arrow(text, {"version": version})["unit"].to_pylist()))
    return found[0], found[1]


def narrow(store: ClickHouseEngine, keys: frozenset[str], executions: frozenset[str]) -> None:
    """The `only_derived_*` views over these units (queries.derived.only)."""
    for name, units in (("only_keys", keys), ("only_executions", executions)):
        params = {"units": sorted(units)}
        store.command(render(_named("only_units", table=name), "clickhouse", params), params)
    for view in ("only_derived_executions", "only_derived_lock_incidents",
                 "only_derived_duplicate_runs"):
        store.command(sql_text(view, "clickhouse"))
