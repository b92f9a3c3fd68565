"""A new batch costs a layer: what changed is told from the segments, and only the keys
it touches are derived again, while the result stays that of a build from nothing."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from forensics_cases import (
    an_overrun_whose_other_owner_ended_before_the_batch,
    ev,
    locked,
    names_in_an_overrun,
    reached_and_unreached_holders,
    run,
)
from support.derived_rows import state
from support.fork_server import ForkServer

from derive import base as derive_base
from derive.embedded import incremental
from derive.embedded import state as derived_state
from queries import derived, duplicates
from store.embedded import EmbeddedStore
from store.lineage import LINEAGE

KEY = {"idempotency_key": "inv-1"}


def acked(job: str, key: str) -> list[dict]:
    return run(job, 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03", "ack")],
               idempotency_key=key)


def old_day(events: list[dict]) -> list[dict]:
    """`events` moved to a day long before the rest (what retention drops)."""
    return [dict(e, ts="2025-10-01T" + e["ts"][11:]) for e in events]


OLD_DAY_ENDS = date(2025, 10, 2)


def jobs_changed(store: EmbeddedStore, before: dict[str, int]) -> set[str]:
    """The job_ids of the rows the store gained or lost since `before` was read."""
    changes = store.changes_since(before)
    assert changes is not None
    return set(changes.rows()["job_id"].to_pylist())


def log_read_in_part_then_merged(store: EmbeddedStore, make_table) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """A hot log read after its first frame (j1), given a second (j2), then merged (its
    two frames wait in the trash); what was read."""
    store.write_hot(make_table(acked("j1", "a")))
    before = read_now(store)
    store.write_hot(make_table(acked("j2", "b")))
    store.compact()
    return before


def read_now(store: EmbeddedStore) -> dict[str, int]:
    derived.ensure(store)
    kept = derived_state.load(store)
    assert kept is not None
    return kept.read


def read_state(store: EmbeddedStore) -> derived_state.State:
    derived.ensure(store)
    kept = derived_state.load(store)
    assert kept is not None
    return kept


def from_nothing(store: EmbeddedStore, into: Path) -> dict:
    shutil.copytree(store.root, into, ignore=shutil.ignore_patterns("derived"))
    fresh = EmbeddedStore(into)
    try:
        return state(fresh)
    finally:
        fresh.close()


def test_a_merged_segment_names_the_segments_it_holds(embedded, make_table) -> None:
    embedded.write(make_table(acked("j1", "a")))
    embedded.write(make_table(acked("j2", "b")))
    inputs = {f"{p.parent.name}/{p.name}" for p in embedded.segments()}
    embedded.compact()
    (merged,) = embedded.segments()
    recorded = json.loads(pq.read_schema(merged).metadata[LINEAGE.encode()])
    assert set(recorded) == inputs


def test_a_compaction_brings_no_new_rows(embedded, make_table) -> None:
    embedded.write(make_table(acked("j1", "a")))
    embedded.write(make_table(acked("j2", "b")))
    before = read_now(embedded)
    embedded.compact()
    changes = embedded.changes_since(before)
    assert changes is not None
    assert changes.rows().num_rows == 0
    assert len(changes.new_segments) == 1 and len(changes.gone) == 2


def test_a_hot_log_that_grew_brings_only_its_new_frames(embedded, make_table) -> None:
    embedded.write_hot(make_table(acked("j1", "a")))
    before = read_now(embedded)
    embedded.write_hot(make_table(acked("j2", "b")))
    assert jobs_changed(embedded, before) == {"j2"}


def test_rows_retention_dropped_are_read_back_from_the_trash(embedded, make_table) -> None:
    embedded.write(make_table(old_day(acked("j-old", "old"))))
    embedded.write(make_table(acked("j1", "a")))
    before = read_now(embedded)
    assert embedded.drop_days_before(OLD_DAY_ENDS) == ["2025-10-01"]
    assert jobs_changed(embedded, before) == {"j-old"}


def test_rows_gone_from_the_trash_too_call_for_a_build_from_nothing(
    embedded, make_table
) -> None:
    embedded.write(make_table(old_day(acked("j-old", "old"))))
    embedded.write(make_table(acked("j1", "a")))
    before = read_now(embedded)
    assert embedded.drop_days_before(OLD_DAY_ENDS) == ["2025-10-01"]
    shutil.rmtree(embedded.trash_dir)
    assert embedded.changes_since(before) is None


def test_a_batch_adds_a_layer_and_leaves_the_base_as_it_was(embedded, make_table) -> None:
    embedded.write(make_table(acked("j1", "a")))
    derived.ensure(embedded)
    first = derived_state.load(embedded)
    embedded.write(make_table(acked("j2", "b")))
    derived.ensure(embedded)
    then = derived_state.load(embedded)
    assert first is not None and then is not None
    assert then.layers[: len(first.layers)] == first.layers
    assert len(then.layers) == len(first.layers) + 1
    assert then.sizes["derived_executions"][-1] == 1  # j2's one execution, not j1's again


def test_a_batch_derives_the_rows_of_its_keys_not_the_store(embedded, make_table) -> None:
    for n in range(40):
        embedded.write(make_table(acked(f"j{n}", f"k{n}")))
    embedded.compact()
    new = make_table(run("j7", 2, "w2", "00:20", [("00:21", "side_effect"), ("00:22", "ack")],
                         idempotency_key="k7"))
    embedded.write(new)
    found = incremental.touched(embedded, new)
    assert found.keys == ["j7", "k7"]
    assert set(found.rows["job_id"].to_pylist()) == {"j7"}
    assert found.rows.num_rows == 2 * new.num_rows  # both runs of j7, nothing else


def test_a_late_redelivery_of_an_old_key_makes_it_a_duplicate(embedded, make_table) -> None:
    embedded.write(make_table(acked("j1", "inv-1")))
    assert duplicates(embedded).empty
    late = run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY)
    embedded.write(make_table(late))
    row = duplicates(embedded).iloc[0]
    assert (row["key"], row["executions"], row["harmful"]) == ("inv-1", 2, True)


def silent_twice(job: str) -> list[dict]:
    """Job `job` run twice and acked, nothing said of its effect (what Celery's event
    stream or worker logs give): a duplicate of unknown outcome."""
    return (run(job, None, "w1", "00:00", [("00:40", "ack")])
            + run(job, None, "w2", "00:31", [("00:33", "ack")]))


def effect_lines(job: str, *at: str) -> list[dict]:
    """The app's own `side_effect` lines for job `job`, keyed by the job id alone."""
    return [{"ts": f"2025-11-30T12:{ts}Z", "event": "side_effect", "job_id": job} for ts in at]


def test_effect_lines_a_later_batch_brings_make_a_key_s_outcome_known_by_its_layer(
    embedded, make_table, tmp_path
) -> None:
    embedded.write(make_table(silent_twice("j1") + silent_twice("j2")))
    assert set(duplicates(embedded)["outcome"]) == {"unknown"}
    first = read_state(embedded)
    embedded.write(make_table(effect_lines("j1", "00:01", "00:32")))
    found = duplicates(embedded).set_index("key")
    assert (found.loc["j1", "outcome"], found.loc["j2", "outcome"]) == ("harmful", "unknown")
    then = read_state(embedded)
    assert len(then.layers) == len(first.layers) + 1
    assert then.sizes["derived_executions"][-1] == 2  # j1's two runs, not j2's
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")


def test_a_job_whose_key_changes_leaves_its_old_key(embedded, make_table, tmp_path) -> None:
    embedded.write(make_table(acked("j1", "a") + acked("j2", "a")))
    assert list(duplicates(embedded)["key"]) == ["a"]
    embedded.write(make_table([ev("00:05", "commit", "j2", idempotency_key="b")]))
    assert duplicates(embedded).empty  # j2's key is now b: a and b ran once each
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")


def test_lock_holders_of_other_keys_are_judged_again(embedded, make_table, tmp_path) -> None:
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])))
    (overrun,) = state(embedded)["derived_lock_incidents"]
    assert "'o2'" not in overrun
    embedded.write(make_table(locked("j2", 1, "w2", "o2", "00:07", 5000, [("00:09", "ack")])))
    kept = state(embedded)
    assert kept == from_nothing(embedded, tmp_path / "fresh")
    assert any("'o2'" in "".join(row) for row in kept["derived_lock_incidents"])  # j1's



def newest_lock_units(store: EmbeddedStore) -> set[str]:
    """The execution_uids whose lock incidents the newest layer replaces."""
    kept = derived_state.load(store)
    assert kept is not None
    path = derived_state.units_path(store, "derived_lock_incidents", kept.layers[-1])
    return set(pq.read_table(path)["unit"].to_pylist())


def test_a_holder_of_the_lock_long_before_the_batch_is_not_judged_again(
    embedded, make_table, tmp_path
) -> None:
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])))
    derived.ensure(embedded)
    embedded.write(make_table(locked("j2", 1, "w2", "o2", "40:00", 5000, [("40:02", "ack")])))
    derived.ensure(embedded)
    assert len(newest_lock_units(embedded)) == 1  # j2's own execution, not j1's as well
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")


#: Two batches on one lock where a holder the second reaches keeps an overrun with one it
#: does not reach: that holder is far from the batch, or ended before it.
REACHED_HOLDER_STORIES = pytest.mark.parametrize(
    "story", [reached_and_unreached_holders, an_overrun_whose_other_owner_ended_before_the_batch],
    ids=["unreached", "ended-before-the-batch"])


@REACHED_HOLDER_STORIES
def test_a_holder_the_batch_reaches_keeps_an_incident_with_one_it_does_not(
    embedded, make_table, tmp_path, story
) -> None:
    first, then = story()
    embedded.write(make_table(first))
    derived.ensure(embedded)
    embedded.write(make_table(then))
    kept = state(embedded)
    assert kept == from_nothing(embedded, tmp_path / "fresh")
    assert names_in_an_overrun(kept["derived_lock_incidents"], "o3")  # j1's, still


def test_a_base_keeps_its_executions_in_the_order_they_ended(embedded, make_table) -> None:
    events = [e for i in range(8) for e in locked(  # the later job_ids end earlier
        f"j{i}", 1, f"w{i}", f"o{i}", f"{50 - 5 * i:02d}:00", 5000,
        [(f"{52 - 5 * i:02d}:00", "ack")])]
    embedded.write(make_table(events))
    derived.ensure(embedded)
    base = derived_state.load(embedded)
    assert base is not None
    ends = pq.read_table(derived_state.rows_path(embedded, "derived_executions",
                                                 base.layers[0]))["end_us"].to_pylist()
    assert len(ends) == 8
    assert ends == sorted(ends)


def test_thekept_holders_read_are_those_whose_span_ends_in_the_window() -> None:
    holders = pa.table({  # span ends: 30, 20 (the lock's expiry), 8, never, another lock's
        "execution_uid": ["run-ends-late", "lock-expires-late", "both-early", "running",
                          "other-lock"],
        "lock_key": ["lock:a", "lock:a", "lock:a", "lock:a", "lock:b"],
        "lock_acquired_us": [1, 1, 1, 1, 1],
        "end_us": [30, 10, 5, None, 50],
        "lock_valid_until_us": [11, 20, 8, 4, 60],
    })
    empty = {"key": pa.string(), "lock_owner": pa.string(), "lock_released_us": pa.int64(),
             "lock_expired_while_running": pa.bool_()}
    for column, kind in empty.items():
        holders = holders.append_column(column, pa.nulls(holders.num_rows, kind))
    con = duckdb.connect()
    con.execute("CREATE TABLE derived_executions AS SELECT * FROM holders")
    incremental.strings(con, "touched_locks", ["lock:a"])
    schema = holders.select(incremental.HOLDER_COLUMNS).schema

    def read(since: int, until: int | None) -> set[str]:
        table = incremental.kept_holders(con, since, until, schema)
        return set(table["execution_uid"].to_pylist())

    assert read(15, None) == {"run-ends-late", "lock-expires-late", "running"}
    assert read(9, 30) == {"lock-expires-late"}
    assert read(0, 9) == {"both-early"}


def test_a_duplicate_whose_lock_another_key_took_is_listed_again(
    embedded, make_table, tmp_path
) -> None:
    twice = (locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])
             + run("j1", 2, "w3", "00:40", [("00:41", "ack")]))
    embedded.write(make_table(twice))
    assert not duplicates(embedded).iloc[0]["overlapped"]
    # j2 takes the lock in the gap of j1's expired one: a batch of j2's key alone.
    embedded.write(make_table(locked("j2", 1, "w2", "o2", "00:07", 5000, [("00:09", "ack")])))
    row = duplicates(embedded).iloc[0]
    assert (row["key"], row["overlapped"]) == ("j1", True)
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")

@pytest.mark.parametrize("kept_layers", [1, derived_state.MAX_LAYERS + 2])
def test_layers_read_as_one_table_before_and_after_a_fold(
    embedded, make_table, tmp_path, kept_layers
) -> None:
    for n in range(kept_layers):
        embedded.write(make_table(acked(f"j{n}", "shared" if n % 2 else f"k{n}")))
        derived.ensure(embedded)
    kept = derived_state.load(embedded)
    assert kept is not None and len(kept.layers) <= derived_state.MAX_LAYERS + 1
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")


def layered(embedded, make_table, batches: int) -> None:  # type: ignore[no-untyped-def]
    """A store derived batch after batch: a build from nothing, then `batches` layers."""
    for n in range(batches + 1):
        embedded.write(make_table(acked(f"j{n}", "shared" if n % 2 else f"k{n}")))
        derived.ensure(embedded)


def test_layers_past_the_limit_are_folded_and_the_base_stays(
    embedded, make_table, tmp_path
) -> None:
    layered(embedded, make_table, derived_state.MAX_LAYERS)
    before = derived_state.load(embedded)
    assert before is not None and len(before.layers) == derived_state.MAX_LAYERS + 1
    embedded.write(make_table(acked("j99", "shared")))
    derived.ensure(embedded)
    after = derived_state.load(embedded)
    assert after is not None
    assert after.layers[0] == before.layers[0]  # the base is not written again
    assert len(after.layers) < len(before.layers)
    assert after.generation == before.generation + 1
    assert state(embedded) == from_nothing(embedded, tmp_path / "fresh")


def test_a_fold_takes_the_newest_layers_no_larger_than_those_after_them() -> None:
    def span(*rows: int) -> int:
        layers = [str(n) for n in range(len(rows))]
        return derived_state.fold_span(derived_state.State(
            "s", {}, layers, "a", {"derived_executions": list(rows)}))

    limit = derived_state.MAX_LAYERS
    assert span(1000, *[1] * limit) == 0  # within the limit
    assert span(1000, *[1] * (limit + 1)) == limit + 1  # equal layers: all folded
    assert span(1000, 64, 32, 16, 8, 4, 2, 1, 1, 1) == limit + 1  # 64 <= 65: a carry
    assert span(1000, 90, 40, 16, 8, 4, 2, 1, 1, 1) == limit - 1  # 40 > 33: it stays
    assert span(1000, 500, 400, 300, 200, 100, 50, 20, 10, 5) == 2


def test_a_merge_into_a_new_base_waits_for_a_quarter_of_all_tables_rows() -> None:
    def merges(**sizes: list[int]) -> bool:
        return derived_state.should_merge(derived_state.State(
            "s", {}, ["base", "l1", "l2"], "a", dict(sizes)))

    # One segment count a segment: a small table whose layers outgrow a quarter of it.
    assert not merges(derived_executions=[1_500_000, 1500, 1500],
                      derived_segment_counts=[629, 300, 300])
    assert merges(derived_executions=[1_500_000, 200_000, 200_000],
                  derived_segment_counts=[629, 300, 300])
    assert merges(derived_executions=[10, 600, 600])  # a small store: 1000 rows at least


def test_a_derivation_killed_while_folding_leaves_a_state_the_next_one_completes(
    embedded, make_table, tmp_path, deriver
) -> None:
    layered(embedded, make_table, derived_state.MAX_LAYERS)
    embedded.write(make_table(acked("j99", "shared")))
    expected = from_nothing(embedded, tmp_path / "expected")
    shutil.copytree(embedded.root, tmp_path / "whole")
    done = deriver(tmp_path / "whole", -1)
    assert done.returncode == 0
    commits = [n for n, name in enumerate(done.placed) if name == derived_state.STATE]
    assert len(commits) >= 2  # the batch's layer and state, then the fold's
    for kill_at in kill_points(done.placed):
        if kill_at < commits[0]:
            continue  # a kill before the batch's state is the next test's
        with _killed_at(embedded, tmp_path, deriver, kill_at) as after:
            assert state(after) == expected, f"killed at file {kill_at}"


@dataclass(frozen=True)
class Derived:
    """How a derivation in a child process ended: its exit status (minus the signal that
    killed it) and the names of the files it placed, in order (none when it did not live
    to say)."""

    returncode: int
    placed: list[str]


def kill_points(placed: list[str]) -> list[int]:
    """Where to kill a derivation that placed `placed`: at each commit of its state, and at
    the first, middle and last file of each run of files between commits.

    A run's files are named by no state until the commit after it, so a kill inside a run
    differs from one at its ends only in how many of them are in place: each leaves the
    state committed before the run, and files no state names."""
    commits = {n for n, name in enumerate(placed) if name == derived_state.STATE}
    points, start = set(commits), 0
    for end in [*sorted(commits), len(placed)]:
        if start < end:
            points |= {start, (start + end - 1) // 2, end - 1}
        start = end + 1
    return sorted(points)


def test_kill_points_are_each_commit_and_the_ends_and_middle_of_each_run_between() -> None:
    placed = [*"abcdefg", derived_state.STATE, "h", derived_state.STATE]
    assert kill_points(placed) == [0, 3, 6, 7, 8, 9]


class Deriver:
    """Derivations of a store in child processes forked from one server that imported
    dupescope once (`derive_crash_child.py --serve`)."""

    def __init__(self) -> None:
        self._server = ForkServer(Path(__file__).with_name("derive_crash_child.py"))

    def __call__(self, folder: Path, kill_at: int) -> Derived:
        """A derivation of `folder` killed (SIGKILL) as it places its `kill_at`-th file
        (never if negative)."""
        status, placed = self._server.ask(str(folder), str(kill_at))
        return Derived(status, placed.split())

    def close(self) -> None:
        self._server.close()


@pytest.fixture(scope="module")
def deriver() -> Iterator[Deriver]:
    server = Deriver()
    yield server
    server.close()


@contextmanager
def _killed_at(
    embedded: EmbeddedStore, tmp_path: Path, deriver: Deriver, kill_at: int
) -> Iterator[EmbeddedStore]:
    """A copy of the store whose derivation was killed (SIGKILL) at its `kill_at`-th file,
    opened by the next process; removed afterwards."""
    copy = tmp_path / f"killed-{kill_at}"
    shutil.copytree(embedded.root, copy)
    assert deriver(copy, kill_at).returncode == -signal.SIGKILL
    after = EmbeddedStore(copy)
    try:
        yield after
    finally:
        after.close()
        shutil.rmtree(copy)


def test_a_derivation_killed_as_it_places_its_files_leaves_a_state_the_next_one_completes(
    embedded, make_table, tmp_path, deriver
) -> None:
    embedded.write(make_table(acked("j1", "a") + locked("j3", 1, "w1", "o1", "00:00", 500,
                                                         [("00:09", "ack")])))
    derived.ensure(embedded)
    embedded.write(make_table(acked("j2", "a")))  # a batch: a duplicate now
    expected = from_nothing(embedded, tmp_path / "expected")
    shutil.copytree(embedded.root, tmp_path / "whole")
    done = deriver(tmp_path / "whole", -1)
    assert done.returncode == 0
    assert len(done.placed) > 10  # every layer file, the state, a kept answer
    for kill_at in kill_points(done.placed):
        with _killed_at(embedded, tmp_path, deriver, kill_at) as after:
            assert state(after) == expected, f"killed at file {kill_at}"
            assert list(duplicates(after)["key"]) == ["a"]


def test_a_merge_of_a_log_read_in_part_brings_only_its_frames_not_read(
    embedded, make_table
) -> None:
    before = log_read_in_part_then_merged(embedded, make_table)
    assert jobs_changed(embedded, before) == {"j2"}


def test_a_merge_of_a_log_gone_from_the_trash_counts_as_new_whole(
    embedded, make_table
) -> None:
    before = log_read_in_part_then_merged(embedded, make_table)
    shutil.rmtree(embedded.trash_dir)
    assert jobs_changed(embedded, before) == {"j1", "j2"}


def test_a_batch_larger_than_the_store_is_derived_by_a_build_from_nothing(
    embedded, make_table, monkeypatch
) -> None:
    monkeypatch.setattr(derive_base, "LARGE_BATCH_ROWS", 5)
    embedded.write(make_table(acked("j1", "a")))
    derived.ensure(embedded)
    first = derived_state.load(embedded)
    embedded.write(make_table(acked("j2", "b") + acked("j3", "c")))  # 6 rows, 1 execution
    derived.ensure(embedded)
    then = derived_state.load(embedded)
    assert first is not None and then is not None
    assert len(then.layers) == 1 and then.epoch != first.epoch


@pytest.mark.parametrize("resent", [False, True])
def test_a_merged_segment_is_counted_as_its_inputs_were(
    embedded, make_table, tmp_path, resent
) -> None:
    embedded.write(make_table(acked("j1", "a")))
    embedded.write(make_table(acked("j2", "b") + (acked("j1", "a") if resent else [])))
    derived.ensure(embedded)
    embedded.compact()  # with a resend, the merge drops its repeats: counted again
    kept = state(embedded)
    assert kept == from_nothing(embedded, tmp_path / "fresh")
    assert kept["answer_store_summary"][0][0] == "6"  # events, repeats merged away
