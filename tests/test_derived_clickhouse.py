"""On ClickHouse and chDB, a new batch is derived by the units it touches: rows versioned
by unit, found by when they were inserted, while the result stays that of a build from
nothing (tests/test_derived_state.py holds it to that batch after batch)."""

from __future__ import annotations

import dataclasses
import shutil
import signal
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from chdb import session
from forensics_cases import (
    an_overrun_whose_other_owner_ended_before_the_batch,
    locked,
    names_in_an_overrun,
    reached_and_unreached_holders,
    run,
)
from support.derived_rows import state
from support.fork_server import ForkServer

from derive.clickhouse import kept as clickhouse_derived
from queries import derived, duplicates
from store.clickhouse import ChdbStore, ids_ddl
from store.contract import COLUMNS

CHILD = Path(__file__).with_name("derive_crash_child_chdb.py")


@pytest.fixture
def chdb(tmp_path: Path) -> Iterator[ChdbStore]:
    opened = ChdbStore(str(tmp_path / "chdb"))
    yield opened
    opened.close()


def acked(job: str, key: str, start: str = "00:01") -> list[dict]:
    return run(job, 1, "w1", start, [("00:02", "side_effect"), ("00:03", "ack")],
               idempotency_key=key)


def status(store: ChdbStore) -> clickhouse_derived.Status:
    found = clickhouse_derived.status(store)
    assert found is not None
    return found


def rows_written(store: ChdbStore, table: str, since_version: int) -> set[str]:
    """The keys whose rows of `table` a derivation after `since_version` wrote."""
    found = store.arrow(f"SELECT DISTINCT key AS unit FROM {table}_rows "
                        "WHERE _version > {v:UInt64}", {"v": since_version})
    return set(found["unit"].to_pylist())


def test_a_batch_writes_the_rows_of_the_keys_it_touches_only(chdb, make_table) -> None:
    chdb.write(make_table(acked("j1", "a") + acked("j2", "b")))
    derived.ensure(chdb)
    before = status(chdb)
    chdb.write(make_table(acked("j3", "a", "00:05")))  # a second run of key a
    assert list(duplicates(chdb)["key"]) == ["a"]
    after = status(chdb)
    assert after.epoch == before.epoch and after.generation == before.generation + 1
    assert rows_written(chdb, "derived_executions", before.version) == {"a"}  # not b


def test_nothing_new_derives_nothing(chdb, make_table) -> None:
    chdb.write(make_table(acked("j1", "a")))
    derived.ensure(chdb)
    before = status(chdb)
    chdb.command("OPTIMIZE TABLE events FINAL")
    derived.ensure(chdb)
    assert status(chdb) == before


def from_nothing(store: ChdbStore) -> dict:
    """The state a build from nothing over the same events gives (in a database of the
    store's own chDB: one chDB folder per process)."""
    fresh = ChdbStore(store.path, database="from_nothing")
    try:
        fresh.write(store.arrow("SELECT * FROM events"))
        return state(fresh)
    finally:
        fresh.close()


def test_effect_lines_a_later_batch_brings_make_a_key_s_outcome_known(
    chdb, make_table
) -> None:
    silent = [run(job, None, w, start, [(end, "ack")])
              for job in ("j1", "j2") for w, start, end in (("w1", "00:00", "00:40"),
                                                             ("w2", "00:31", "00:33"))]
    chdb.write(make_table([e for events in silent for e in events]))
    assert set(duplicates(chdb)["outcome"]) == {"unknown"}
    before = status(chdb)
    chdb.write(make_table([{"ts": "2025-11-30T12:00:32Z", "event": "side_effect",
                            "job_id": "j1"}]))  # the app's own line, keyed by job id
    found = duplicates(chdb).set_index("key")
    assert (found.loc["j1", "outcome"], found.loc["j2", "outcome"]) == ("absorbed", "unknown")
    assert rows_written(chdb, "derived_executions", before.version) == {"j1"}
    assert rows_written(chdb, "answer_duplicates", before.version) == {"j1"}
    assert state(chdb) == from_nothing(chdb)


def test_tables_kept_without_the_effect_evidence_are_built_again(chdb, make_table) -> None:
    again = run("j2", 1, "w2", "00:05", [("00:06", "side_effect"), ("00:07", "ack")],
                idempotency_key="a")
    chdb.write(make_table(acked("j1", "a") + again))
    derived.ensure(chdb)
    built = status(chdb)
    # As a layout from before outcomes could be unknown left them, opened by a process
    # of this version.
    chdb.command("ALTER TABLE derived_duplicate_runs_rows DROP COLUMN had_effect_evidence")
    reopened = ChdbStore(chdb.path)
    try:
        reopened.write(make_table(acked("j3", "b")))
        assert list(duplicates(reopened)["outcome"]) == ["harmful"]
        assert status(reopened).epoch != built.epoch  # built from nothing
        assert state(reopened) == from_nothing(reopened)
    finally:
        reopened.close()


def test_a_key_left_with_fewer_rows_keeps_none_of_its_old_ones(chdb, make_table) -> None:
    chdb.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05")))
    assert list(duplicates(chdb)["key"]) == ["a"]
    # j2 turns out to carry key b: key a keeps one execution, and its second row is
    # tombstoned, not left behind.
    chdb.write(make_table(run("j2", 1, "w1", "00:06", [], idempotency_key="b")))
    keys = derived.table(chdb, "derived_executions")["key"].to_pylist()
    assert keys.count("a") == 1
    assert state(chdb) == from_nothing(chdb)


def incidents_written(store: ChdbStore, since_version: int) -> set[str]:
    """The executions whose lock incidents a derivation after `since_version` wrote."""
    written = store.arrow("SELECT DISTINCT execution_uid FROM derived_lock_incidents_rows "
                          "WHERE _version > {v:UInt64}", {"v": since_version})
    return set(written["execution_uid"].to_pylist())


def test_a_new_holder_of_an_old_lock_derives_the_old_holder_s_incidents_again(
    chdb, make_table
) -> None:
    chdb.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 500, [("00:09", "ack")])))
    derived.ensure(chdb)
    before = status(chdb)
    chdb.write(make_table(locked("j2", 1, "w2", "o2", "00:03", 30_000, [("00:04", "ack")])))
    derived.ensure(chdb)
    j1 = chdb.arrow("SELECT execution_uid FROM derived_executions WHERE job_id = 'j1'")
    assert j1["execution_uid"].to_pylist()[0] in incidents_written(chdb, before.version)
    assert state(chdb) == from_nothing(chdb)


def test_a_holder_of_the_lock_long_before_the_batch_is_not_judged_again(
    chdb, make_table
) -> None:
    chdb.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])))
    derived.ensure(chdb)
    before = status(chdb)
    chdb.write(make_table(locked("j2", 1, "w2", "o2", "40:00", 5000, [("40:02", "ack")])))
    derived.ensure(chdb)
    j1 = chdb.arrow("SELECT execution_uid FROM derived_executions WHERE job_id = 'j1'")
    assert j1["execution_uid"].to_pylist()[0] not in incidents_written(chdb, before.version)
    assert state(chdb) == from_nothing(chdb)


#: Two batches on one lock where a holder the second reaches keeps an overrun with one it
#: does not reach: that holder is far from the batch, or ended before it.
REACHED_HOLDER_STORIES = pytest.mark.parametrize(
    "story", [reached_and_unreached_holders, an_overrun_whose_other_owner_ended_before_the_batch],
    ids=["unreached", "ended-before-the-batch"])


@REACHED_HOLDER_STORIES
def test_a_holder_the_batch_reaches_keeps_an_incident_with_one_it_does_not(
    chdb, make_table, story
) -> None:
    first, then = story()
    chdb.write(make_table(first))
    derived.ensure(chdb)
    chdb.write(make_table(then))
    kept = state(chdb)
    assert kept == from_nothing(chdb)
    assert names_in_an_overrun(kept["derived_lock_incidents"], "o3")  # j1's, still


def test_the_holders_of_a_lock_key_are_found_through_its_projection(chdb, make_table) -> None:
    """A lock_key's holders among the kept executions are read by their units, which the
    kept rows' lock_key projection lists: a read of every execution grew with the store
    (5.4 s a batch at 100M events)."""
    chdb.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 500, [("00:09", "ack")])))
    derived.ensure(chdb)
    plan = _holders_plan(chdb)
    assert any("by_lock_key" in line for line in plan), "\n".join(plan)


def test_kept_tables_and_the_id_index_are_marked_for_scattered_lookups(
    chdb, make_table
) -> None:
    """A batch looks up its units (random job_ids) scattered over every kept row: each
    lookup reads one granule, so the tables it looks them up in keep small granules."""
    chdb.write(make_table(acked("j1", "k1")))
    derived.ensure(chdb)
    tables = chdb.arrow(
        "SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() "
        "AND (endsWith(name, '_rows') OR name = 'events_ids')").to_pylist()
    assert {"events_ids", "derived_jobs_rows", "derived_executions_rows"} <= {
        t["name"] for t in tables}
    granularity = f"index_granularity = {clickhouse_derived.LOOKUP_GRANULARITY}"
    assert all(granularity in t["engine_full"] for t in tables), tables


def _holders_plan(store: ChdbStore) -> list[str]:
    return store.arrow(
        "EXPLAIN projections = 1 SELECT key FROM derived_executions_rows "
        "WHERE lock_key IN (SELECT {lock:String})", {"lock": "lock:acct-1"}
    ).column(0).to_pylist()


def test_tables_kept_before_the_lock_key_projection_get_it_in_place(chdb, make_table) -> None:
    chdb.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 500, [("00:09", "ack")])))
    derived.ensure(chdb)
    built = status(chdb)
    # As a store derived by the earlier layout left it: no projection, format 1.
    chdb.command("ALTER TABLE derived_executions_rows DROP PROJECTION by_lock_key")
    clickhouse_derived.set_status(chdb, dataclasses.replace(built, format=1,
                                                            version=built.version + 1))
    chdb.write(make_table(locked("j2", 1, "w2", "o2", "00:03", 30_000, [("00:04", "ack")])))
    derived.ensure(chdb)
    after = status(chdb)
    assert (after.format, after.epoch) == (clickhouse_derived.FORMAT, built.epoch)  # no rebuild
    assert after.generation == built.generation + 1  # the batch was absorbed
    assert any("by_lock_key" in line for line in _holders_plan(chdb))
    assert state(chdb) == from_nothing(chdb)


def test_the_duplicates_answer_is_kept_by_key(chdb, make_table) -> None:
    """A batch writes the rows of its keys in the kept duplicates answer: computing it
    again from every duplicate run took 2.8 s a generation at 100M events."""
    chdb.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05") + acked("j3", "b")))
    assert list(duplicates(chdb)["key"]) == ["a"]
    before = status(chdb)
    chdb.write(make_table(acked("j4", "b", "00:07")))
    assert list(duplicates(chdb)["key"]) == ["a", "b"]
    assert rows_written(chdb, "answer_duplicates", before.version) == {"b"}
    assert state(chdb) == from_nothing(chdb)


def test_a_duplicate_whose_lock_another_key_took_is_listed_again(chdb, make_table) -> None:
    twice = (locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])
             + run("j1", 2, "w3", "00:40", [("00:41", "ack")]))
    chdb.write(make_table(twice))
    assert not duplicates(chdb).iloc[0]["overlapped"]
    # j2 takes the lock in the gap of j1's expired one: a batch of j2's key alone.
    chdb.write(make_table(locked("j2", 1, "w2", "o2", "00:07", 5000, [("00:09", "ack")])))
    row = duplicates(chdb).iloc[0]
    assert (row["key"], row["overlapped"]) == ("j1", True)
    assert state(chdb) == from_nothing(chdb)


def test_a_store_that_kept_the_duplicates_answer_whole_keeps_it_by_key_in_place(
    chdb, make_table
) -> None:
    chdb.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05") + acked("j3", "b")))
    derived.ensure(chdb)
    built = status(chdb)
    # As the earlier layout (format 2) left it: the answer a table of its own.
    chdb.command("DROP VIEW answer_duplicates")
    chdb.command("DROP TABLE answer_duplicates_rows")
    chdb.command("CREATE TABLE answer_duplicates ENGINE = MergeTree ORDER BY tuple() "
                 "AS SELECT 1 AS answer_row")
    clickhouse_derived.set_status(chdb, dataclasses.replace(built, format=2,
                                                            version=built.version + 1))
    chdb.write(make_table(acked("j4", "b", "00:07")))
    assert list(duplicates(chdb)["key"]) == ["a", "b"]
    after = status(chdb)
    assert (after.format, after.epoch) == (clickhouse_derived.FORMAT, built.epoch)  # no rebuild
    assert after.generation == built.generation + 1  # the batch was absorbed
    assert state(chdb) == from_nothing(chdb)


def test_a_row_that_turns_up_late_in_the_window_already_read_is_derived(
    chdb, make_table
) -> None:
    chdb.write(make_table(acked("j1", "a")))
    derived.ensure(chdb)
    chdb.write(make_table(acked("j2", "a", "00:05")))
    # As if the last derivation had read past j2's insert without seeing it (an insert
    # still in flight): `high` is beyond it, the window's checksum is the old one.
    seen = status(chdb)
    newest = chdb.arrow("SELECT toString(max(ingested_at)) AS t FROM events")["t"][0].as_py()
    clickhouse_derived.set_status(chdb, clickhouse_derived.Status(
        seen.format, seen.epoch, seen.generation, seen.version + 1, newest, seen.recent,
        seen.partitions))
    assert list(duplicates(chdb)["key"]) == ["a"]


def test_a_key_first_written_just_before_high_is_read_whole_through_the_index(
    chdb, make_table
) -> None:
    # j1's rows lie in the window before `high`, which the next batch does not read again
    # when nothing turned up late there: the key's history comes through the id index.
    chdb.write(make_table(acked("j1", "a")))
    derived.ensure(chdb)
    chdb.write(make_table(acked("j2", "a", "00:05")))
    row = duplicates(chdb).iloc[0]
    assert (row["key"], row["executions"]) == ("a", 2)
    assert state(chdb) == from_nothing(chdb)


def test_a_day_gone_from_events_builds_from_nothing(chdb, make_table) -> None:
    old = [dict(e, ts="2025-10-01T" + e["ts"][11:]) for e in acked("j0", "a")]
    chdb.write(make_table(old + acked("j1", "a")))
    assert list(duplicates(chdb)["key"]) == ["a"]
    epoch = status(chdb).epoch
    chdb.command("ALTER TABLE events DROP PARTITION {day:Date}", {"day": "2025-10-01"})
    assert duplicates(chdb).empty
    assert status(chdb).epoch != epoch


def test_an_events_table_from_before_insert_times_is_upgraded(tmp_path, make_table) -> None:
    old = session.Session(str(tmp_path / "chdb"))
    old.query("CREATE DATABASE dupescope")
    columns = ", ".join(f"{c.name} {c.clickhouse_type}" for c in COLUMNS)  # no insert time
    old.query(f"CREATE TABLE dupescope.events ({columns}) ENGINE = ReplacingMergeTree "
              "PARTITION BY toDate(ts) ORDER BY (ifNull(idempotency_key, ''), "
              "ifNull(job_id, ''), ts, event_uid)")
    old.close()
    store = ChdbStore(str(tmp_path / "chdb"))
    try:
        store.write(make_table(acked("j1", "a")))
        derived.ensure(store)
        before = status(store)
        derived.ensure(store)  # the rows there were do not look new on every read
        assert status(store) == before
    finally:
        store.close()


def test_rows_written_before_the_id_index_existed_are_found_through_it(tmp_path,
                                                                       make_table) -> None:
    store = ChdbStore(str(tmp_path / "chdb"))
    try:  # as an earlier version left its database: events, and no id index
        for name in ("events_ids_mv", "events_ids", "events_ids_filled"):
            store.command(f"DROP TABLE {name}")
        store.write(make_table(acked("j1", "a")))
        derived.ensure(store)
    finally:
        store.close()
    store = ChdbStore(str(tmp_path / "chdb"))
    try:
        store.write(make_table(acked("j2", "a", "00:05")))  # a second run of key a
        assert list(duplicates(store)["key"]) == ["a"]
        assert state(store) == from_nothing(store)
    finally:
        store.close()


def test_the_id_index_lists_each_pair_under_its_job_and_its_key(chdb, make_table) -> None:
    chdb.write(make_table(acked("j1", "a") + run("j2", 1, "w1", "00:04", [])))
    listed = chdb.arrow("SELECT value, idempotency_key, job_id FROM events_ids "
                        "GROUP BY ALL ORDER BY ALL").to_pylist()
    assert listed == [
        {"value": "a", "idempotency_key": "a", "job_id": "j1"},
        {"value": "j1", "idempotency_key": "a", "job_id": "j1"},
        {"value": "j2", "idempotency_key": "", "job_id": "j2"},
    ]


def test_the_id_index_on_a_cluster_is_kept_on_every_shard_and_outlives_its_events() -> None:
    statements = ids_ddl("jobs", ttl_days=30, cluster="prod")
    assert all(" ON CLUSTER prod" in s for s in statements)
    assert "ReplicatedAggregatingMergeTree" in statements[0]
    assert "TTL day + INTERVAL 31 DAY" in statements[0]
    assert "ENGINE = Distributed(prod, jobs, events_ids_local" in statements[1]
    assert "TO jobs.events_ids_local" in statements[2]
    assert "FROM jobs.events_local" in statements[2]


class Recorder:
    """A store that keeps the statements it is given (a cluster no test can reach)."""

    database = "dupescope"
    cluster = "everywhere"

    def __init__(self) -> None:
        self.statements: list[str] = []

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.statements.append(sql)


def test_derived_tables_on_a_cluster_are_made_on_every_node_and_replicated() -> None:
    recorder = Recorder()
    clickhouse_derived.create_rows_table(recorder, "derived_jobs_rows",  # type: ignore[arg-type]
                                         [("job_id", "Nullable(String)")], "job_id")
    clickhouse_derived.create_view(recorder, "derived_jobs")  # type: ignore[arg-type]
    clickhouse_derived.create_bookkeeping(recorder)  # type: ignore[arg-type]
    assert recorder.statements
    assert all(" ON CLUSTER everywhere" in s for s in recorder.statements)
    created = [s for s in recorder.statements if s.startswith("CREATE TABLE")]
    assert created and all("ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}'" in s
                           for s in created)


@pytest.fixture
def steps() -> Iterator[Callable[..., tuple[int, str]]]:
    """The steps of a chDB derivation killed mid-way, each in a process forked from one
    that imported dupescope once: `prepare FOLDER`, `derive FOLDER N` (killed at statement
    N; never if negative), `check FOLDER`; each gives (exit status, what it answered)."""
    server = ForkServer(CHILD)
    yield server.ask
    server.close()


def test_a_derivation_killed_at_any_statement_leaves_what_the_next_one_completes(
    tmp_path: Path, steps: Callable[..., tuple[int, str]],
) -> None:
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    assert steps("prepare", str(prepared)) == (0, "prepared")
    whole = tmp_path / "whole"
    shutil.copytree(prepared, whole, symlinks=True)
    status, ran = steps("derive", str(whole), "-1")
    assert status == 0
    statements = int(ran)
    assert statements > 30  # every work table, every kept table's rows, the status
    # Four statements spread over the derivation and the last one (the status): each
    # step costs seconds, so not every statement is a kill point.
    for kill_at in sorted({*range(3, statements, statements // 4), statements - 1}):
        copy = tmp_path / f"killed-{kill_at}"
        shutil.copytree(prepared, copy, symlinks=True)
        assert steps("derive", str(copy), str(kill_at)) == (-signal.SIGKILL, "")
        assert steps("check", str(copy)) == (0, "same"), f"killed at {kill_at}"


def test_a_batch_may_hold_events_of_more_than_a_hundred_days(chdb, make_table) -> None:
    first = date(2025, 1, 1)
    records = [{"ts": f"{first + timedelta(days=n)}T12:00:00Z", "event": "enqueue",
                "job_id": f"j{n}", "job_type": "report.build"} for n in range(120)]
    assert chdb.write(make_table(records)) == 120
    assert int(chdb.arrow("SELECT count() AS n FROM events")["n"][0].as_py()) == 120
