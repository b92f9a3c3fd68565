"""Deriving on ClickHouse and chDB only what new rows touch, as on the embedded store.

`events` records when each row was inserted (`ingested_at`, with a minmax index), and the
derived status (derive/clickhouse/kept.py) the newest insert time read (`high`). A
derivation reads the rows inserted since, finds the units they touch as the embedded store
does (derive/embedded/incremental.py: their keys and job_ids, with every row of the jobs of those
keys: the pairs of key and job_id with rows from before the read, which the id index
`events_ids` names, through the sort key, and the others from the read), runs the same query files
over those rows in tables of its own (`derive_work_*`), and writes the touched units'
rows under a new version. What it costs follows the rows touched and their keys' history,
not the size of `events`; a touched lock_key's holders among the other keys are found
through the kept executions' lock_key projection (a `lookup` in derive/catalogue.py), and
read by their keys.

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

import logging
import time
import uuid
from typing import Any

import pyarrow as pa

from derive import answers, base, catalogue
from derive.clickhouse import kept
from derive.library import literal, render
from derive.library import text as sql_text
from derive.progress import Builds, BuildSteps
from derive.rename import inlined, renamed
from store.clickhouse import ClickHouseEngine
from store.sql_files import with_identifiers

log = logging.getLogger("dupescope.queries")

#: Prefix of the tables a derivation works in (one derivation at a time: fixed names).
WORK = "derive_work_"

#: Seconds of inserts read again after `high` each time (inserts in flight).
WINDOW_SECONDS = 10

#: The statements making a work table, by its engine. A build from nothing works over
#: every event, on disk; a batch's work tables hold its units' rows, and kept in memory
#: they spare each of its hundred statements the writing of a part (a fifth of a small
#: batch's absorb on chDB). The rows read (`derive_work_read`, `derive_work_batch`) stay
#: on disk: a refill of `events` can be every row there is, which is then built from
#: nothing.
LARGE = "derive_work_table"
SMALL = "derive_work_table_in_memory"

#: The work table listing the keys whose kept answers of one key a row a batch writes
#: again: the keys it touched and the other holders of their lock_keys, instead of every
#: reader computing the answer again from all the derived rows each generation.
ANSWER_KEYS = "derive_work_answer_keys"


def units() -> dict[str, tuple[str, str]]:
    """Each kept derived table's unit column, and the work table listing its touched
    units (derive/catalogue.py)."""
    touched = catalogue.TOUCHED["clickhouse"]
    return {t.name: (t.unit, touched[t.unit])
            for t in catalogue.kept("clickhouse") if t.unit is not None}


def by_key() -> dict[str, str]:
    """Kept answers of one key a row: table -> the question behind it."""
    return {table: table.removeprefix("answer_") for table in catalogue.by_key()}




def work_sql(text: str) -> str:
    """A query file as a derivation runs it: reading `derive_work_events` for `events`
    and the work tables for the derived ones."""
    names = ["unique_events", "event_facts", *(t.name for t in catalogue.TABLES)]
    return renamed(text, "clickhouse", {name: WORK + name for name in names},
                   sources={"events": WORK + "events"})


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


def upgrade(store: ClickHouseEngine, status: kept.Status) -> kept.Status:
    """Kept tables of an earlier layout (`status.format` in `kept.UPGRADABLE`) brought to
    this one in place: the lookup projections added and filled, the answers kept by key
    computed from the kept rows (seconds, where a build from nothing takes a quarter of
    an hour at 100M events). Call with the lock held; one killed halfway leaves it to the
    next."""
    version = _version(store, status)
    if status.format < 2:
        for looked_up in catalogue.kept("clickhouse"):
            if looked_up.lookup is not None and looked_up.unit is not None:
                kept.add_lookup(store, kept.rows_table(looked_up.name), looked_up.unit,
                                looked_up.lookup)
    for answer_table in by_key():
        kept.drop_table(store, answer_table)  # the whole answer an earlier layout kept
    _keep_answers(store, "derived_duplicate_runs", "derived_lock_incidents", version)
    _drop_work(store)
    # A new row version, so this status is the newest (the rows keep theirs).
    upgraded = kept.Status(kept.FORMAT, status.epoch, status.generation, version,
                           status.high, status.recent, status.partitions)
    kept.set_status(store, upgraded)
    return upgraded


#: A column every kept layout since outcomes could be `unknown` has: tables kept without
#: it cannot tell an absorbed duplicate from one whose effect no run reported, and are
#: built again from nothing (an in-place upgrade would need every run's events again).
EVIDENCE_COLUMN = ("derived_duplicate_runs_rows", "had_effect_evidence")


def evidence(store: ClickHouseEngine) -> bool | None:
    """Whether the kept runs have the evidence column (None: no runs are kept)."""
    table, column = EVIDENCE_COLUMN
    names = [name for name, _ in kept.columns(store, table)]
    return (column in names) if names else None


def moved(store: ClickHouseEngine, status: kept.Status) -> bool:
    """Whether rows were inserted since `status` (or the window before it changed)."""
    poll = _ask(store, "derive_poll", high=status.high, window=WINDOW_SECONDS)
    return bool(poll["new_rows"]) or poll["recent"] != status.recent


def days_gone(store: ClickHouseEngine, status: kept.Status) -> bool:
    """Whether retention dropped a day `status` derived (a build from nothing is due)."""
    return bool(set(status.partitions) - set(kept.partitions(store)))


def _version(store: ClickHouseEngine, status: kept.Status | None) -> int:
    """A row version newer than any written before (the server's clock, or one more)."""
    now = kept.now_us(store)
    return max(now, status.version + 1) if status is not None else now


def build(store: ClickHouseEngine, builds: Builds | None = None) -> kept.Status:
    """Every derived table from nothing, each swapped in whole, each step told to `builds`
    as it begins (derive/progress.py). Call with the lock held."""
    started = time.perf_counter()
    steps = BuildSteps(builds, _build_steps())
    previous = kept.status(store)
    version = _version(store, previous)
    days = kept.partitions(store)
    steps.begin("events")
    summary = _ask(store, "derive_events_summary", window=WINDOW_SECONDS)
    store.command(_named("derive_work_everything"))
    _chain(store, "derive_work_everything", steps=steps)
    for table in catalogue.kept("clickhouse"):
        name, unit = table.name, str(table.unit)
        steps.begin(f"kept {name}")
        built = kept.rows_table(name) + "_next"
        kept.create_rows_table(store, built, kept.columns(store, WORK + name), unit,
                               table.lookup)
        store.command(render(_named("derive_rows_fill", rows=built, unit=unit,
                                    work=WORK + name), "clickhouse", {"version": version}),
                      {"version": version})
        kept.replace_table(store, kept.rows_table(name), built)
        kept.create_view(store, name)
    _keep_answers(store, WORK + "derived_duplicate_runs", WORK + "derived_lock_incidents",
                  version, steps)
    _drop_work(store)
    status = kept.Status(kept.FORMAT, uuid.uuid4().hex, 0, version,
                         summary["high"] or "1970-01-01 00:00:00", summary["recent"], days)
    kept.set_status(store, status)
    steps.finish()
    log.debug("derived tables built from nothing in %.2f s", time.perf_counter() - started)
    return status


def _build_steps() -> int:
    """The steps of a build: `events`, the two views over it, each chained table, each
    kept table written, each answer kept by key."""
    return (1 + len(_VIEWS) + len(catalogue.chained("clickhouse"))
            + len(catalogue.kept("clickhouse")) + len(by_key()))


def _answer_sql(query: str, runs: str, incidents: str) -> str:
    """Kept answer `query` unfiltered, over the duplicate runs and lock incidents named."""
    text = literal(sql_text(query, "clickhouse"), dict(catalogue.answer(query).params))
    return renamed(text, "clickhouse", {"derived_duplicate_runs": runs,
                                        "derived_lock_incidents": incidents})


def _keep_answers(store: ClickHouseEngine, runs: str, incidents: str, version: int,
                  steps: BuildSteps | None = None) -> None:
    """The answers kept by key (`by_key`) from nothing, over every duplicate run and lock
    incident (the tables named), each swapped in whole."""
    for table, query in by_key().items():
        if steps is not None:
            steps.begin(f"answer {table}")
        _work_table(store, WORK + table, _answer_sql(query, runs, incidents))
        built = kept.rows_table(table) + "_next"
        kept.create_rows_table(store, built, kept.columns(store, WORK + table), "key")
        store.command(render(_named("derive_rows_fill", rows=built, unit="key",
                                    work=WORK + table), "clickhouse", {"version": version}),
                      {"version": version})
        kept.replace_table(store, kept.rows_table(table), built)
        kept.create_view(store, table, numbered=catalogue.by_key()[table])


#: The views a derivation makes work tables of before the chained tables.
_VIEWS = ("unique_events", "event_facts")


def _chain(store: ClickHouseEngine, source: str, engine: str = LARGE,
           steps: BuildSteps | None = None) -> None:
    """Every derived table as a work table of `engine`, over the events of `source`."""
    store.command(_named("derive_work_source", source=source))
    for view in _VIEWS:
        if steps is not None:
            steps.begin(view)
        select = work_sql(sql_text(view, "clickhouse"))
        store.command(inlined(_named("derive_work_view", table=WORK + view), "clickhouse",
                              {"query_rows": select}))
    for table in catalogue.chained("clickhouse"):
        if steps is not None:
            steps.begin(table.name)
        _work_table(store, WORK + table.name, work_sql(sql_text(table.file, "clickhouse")),
                    engine)


def _work_table(store: ClickHouseEngine, name: str, select: str, engine: str = LARGE) -> None:
    """Table `name` of the rows of query `select`, made by statement `engine`."""
    started = time.perf_counter()
    store.command(inlined(_named(engine, table=name), "clickhouse", {"query_rows": select}))
    log.debug("derived %s in %.2f s", name, time.perf_counter() - started)


def _drop_work(store: ClickHouseEngine) -> None:
    names = [t.name for t in catalogue.TABLES] + [
        "events", "unique_events", "event_facts", "everything", "read", "batch", "jobs",
        "older", "own", "keys", "keyed", "rest", "found", "keyed_units", "rest_units",
        "all_jobs", "batch_events", "locks", "lock_candidates", "lock_spans", "lock_reached",
        "holders", "holder_units", "answer_keys",
        "answer_runs", "answer_incidents", *by_key()]
    for name in names:
        store.command(_named("derive_work_drop", table=WORK + name))


def absorb(store: ClickHouseEngine, status: kept.Status,
           builds: Builds | None = None) -> kept.Status:
    """The units the rows inserted since `status` touch, derived again under a new
    version (a batch too large for that is built from nothing, told to `builds`). Call
    with the lock held."""
    started = time.perf_counter()
    version = _version(store, status)
    days = kept.partitions(store)
    summary = _ask(store, "derive_window_summary", high=status.high, window=WINDOW_SECONDS)
    # The window before `high` was derived as it was then; read again only if it moved.
    back = 0 if summary["before"] == status.recent else WINDOW_SECONDS
    _run(store, "derive_work_read", high=status.high, window=back)
    _run(store, "derive_work_batch", since=status.high, back=back)
    batch_rows = int(_ask(store, "derive_work_batch_size")["batch_rows"])
    # Only a large batch is weighed against the executions (a count of every kept row).
    if batch_rows > base.LARGE_BATCH_ROWS and base.too_large(batch_rows, int(
        _ask(store, "derived_executions_count")["executions"]
    )):
        return build(store, builds)
    _run(store, "derive_work_jobs")
    _history(store, "derive_work_jobs", WORK + "own", status, back)
    _run(store, "derive_work_keys")
    _run(store, "derive_work_keyed_units")
    _history(store, "derive_work_keyed_units", WORK + "keyed", status, back)
    _run(store, "derive_work_rest_units")
    _history(store, "derive_work_rest_units", WORK + "rest", status, back)
    for step in ("derive_work_found", "derive_work_all_jobs", "derive_work_batch_events"):
        _run(store, step)
    _chain(store, WORK + "found", SMALL)
    _relock(store)
    _of_batch(store)
    for step in ("derive_work_answer_keys", "derive_work_answer_runs",
                 "derive_work_answer_incidents"):
        _run(store, step)
    for table, query in by_key().items():
        _work_table(store, WORK + table, _answer_sql(
            query, WORK + "answer_runs", WORK + "answer_incidents"), SMALL)
    _write_units(store, version)
    _drop_work(store)
    grown = kept.Status(kept.FORMAT, status.epoch, status.generation + 1, version,
                        summary["high"] or status.high, summary["recent"], days)
    kept.set_status(store, grown)
    log.debug("absorbed %d new rows in %.2f s", batch_rows, time.perf_counter() - started)
    return grown


def _of_batch(store: ClickHouseEngine) -> None:
    """The tables of one event a row (worker lifecycle events carry no job) again over
    the new rows alone, once each."""
    store.command(_named("derive_work_source", source=WORK + "batch"))
    for table in catalogue.kept("clickhouse"):
        if table.unit == "event_uid":
            _work_table(store, WORK + table.name,
                        work_sql(sql_text(table.file, "clickhouse")), SMALL)


def _write_units(store: ClickHouseEngine, version: int) -> None:
    """The touched units' rows of every kept table and answer under `version`, and a
    tombstone for each row number a unit no longer fills."""
    answer_units = dict.fromkeys(by_key(), ("key", ANSWER_KEYS))
    for table, (unit, touched) in {**units(), **answer_units}.items():
        params = {"version": version}
        names = {"rows": kept.rows_table(table), "unit": unit, "work": WORK + table,
                 "units": touched}
        for statement in ("derive_rows_write", "derive_rows_tombstones"):
            store.command(render(_named(statement, **names), "clickhouse", params), params)


def _history(store: ClickHouseEngine, units: str, target: str, status: kept.Status,
             back: int) -> None:
    """Every row of the listed units into `target`, however old: the history from before
    the read (`back` seconds before `high`) through the id index (`events_ids`), the rest
    from the read."""
    params = {"high": status.high, "window": back}
    text = _named("derive_work_older", units=units)
    store.command(render(text, "clickhouse", params), params)
    store.command(_named("derive_work_history", units=units, target=target))


def _relock(store: ClickHouseEngine) -> None:
    """Lock incidents again for the touched keys' executions and for every kept holder of
    a lock_key they hold now or held before whose span meets theirs (see
    derive/embedded/incremental.py): a batch costs the holders it reaches, not every holder the
    lock_key ever had."""
    for step in ("derive_work_locks", "derive_work_lock_candidates", "derive_work_lock_spans",
                 "derive_work_lock_reached", "derive_work_holders",
                 "derive_work_holder_units"):
        _run(store, step)
    incidents = sql_text("derive_lock_incidents", "clickhouse")
    incidents = renamed(incidents, "clickhouse", {"derived_executions": WORK + "holders"})
    rederived_only = _named("rederived_lock_incidents", holders=WORK + "holder_units")
    _work_table(store, WORK + "derived_lock_incidents", work_sql(
        inlined(rederived_only, "clickhouse", {"lock_incidents": incidents})), SMALL)


def answer(store: ClickHouseEngine, table: str, status: kept.Status) -> None:
    """Kept answer `table` as of `status`: computed from the derived tables the first
    time it is asked for in a generation, then read as kept."""
    stamp = (status.epoch, status.generation)
    if table in by_key() or kept.answer_stamps(store).get(table) == stamp:
        return
    name = table.removeprefix("answer_")
    started = time.perf_counter()
    _work_table(store, table, answers.select(name, "clickhouse"))
    kept.stamp_answer(store, table, *stamp)
    log.debug("kept answer %s computed in %.2f s", table, time.perf_counter() - started)


def answer_changes(store: ClickHouseEngine, table: str,
                   version: int) -> tuple[list[str], pa.Table]:
    """The keys whose rows of kept answer `table` (one of `by_key()`) derivations wrote
    since row version `version`, and those keys' rows now."""
    rows = kept.rows_table(table)
    params: dict[str, Any] = {"version": version}
    text = with_identifiers(sql_text("kept_answer_keys_since", "clickhouse"), table=rows)
    keys = sorted(store.arrow(render(text, "clickhouse", params), params)["unit"].to_pylist())
    return keys, answer_of_keys(store, table, keys)


def answer_of_keys(store: ClickHouseEngine, table: str, keys: list[str]) -> pa.Table:
    """The rows of kept answer `table` (one of `by_key()`) of `keys` now."""
    params = {"keys": keys}
    text = with_identifiers(sql_text("kept_answer_of_keys", "clickhouse"),
                            table=kept.rows_table(table))
    return store.arrow(render(text, "clickhouse", params), params)


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
