"""The what-if replay's rules, one small story per cause, on DuckDB and chDB alike."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import events_to_table
from forensics_cases import ev, locked, run

from dupescope.cli import main
from queries.whatif import Settings, replay, whatif
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore


def only(frame: pd.DataFrame) -> dict:
    assert len(frame) == 1, frame
    return frame.iloc[0].to_dict()


def typed(job_type: str, events: list[dict], **fields: object) -> list[dict]:
    return [dict(e, job_type=job_type, **fields) for e in events]


def a_visibility_timeout_redelivery(job: str = "j1", key: str = "inv-1") -> list[dict]:
    """`job` runs 40 s under a 30 s visibility timeout; its redelivery at 31 s runs the
    effect again."""
    events = run(job, 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")],
                 idempotency_key=key)
    events += run(job, 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")],
                  idempotency_key=key)
    return events


def stories() -> list[dict]:
    """One story per job type, each on keys, job_ids and locks of its own."""
    events = typed("vt.redelivered", a_visibility_timeout_redelivery())
    # The earlier attempt said nothing after 00:35: crashed or ran on, nobody knows.
    events += typed("vt.silent", run("s1", 1, "w1", "00:00", [
        ("00:02", "side_effect"), ("00:35", "commit")]) + run("s1", 2, "w2", "00:31", [
            ("00:32", "side_effect"), ("00:33", "ack")]), idempotency_key="silent-1")
    # Two job_ids for one key (a producer retry); l1's 5 s lock lapses while it runs to
    # 00:20, l2 takes it at 00:10 and runs the effect too.
    events += typed("lock.taken", [
        ev("00:00", "enqueue", "l1"), ev("00:00.5", "enqueue", "l2")]
        + locked("l1", 1, "w1", "o1", "00:00", 5_000, [
            ("00:01", "side_effect"), ("00:20", "lock_release"), ("00:20", "ack")],
            lock_key="lock:taken")
        + locked("l2", 1, "w2", "o2", "00:10", 5_000, [
            ("00:11", "side_effect"), ("00:12", "lock_release"), ("00:12", "ack")],
            lock_key="lock:taken"), idempotency_key="taken-1")
    # One key per cause no limit explains: a producer retry, a crash, an ack the broker
    # lost, a nack.
    ends = {"worker_crash": [("00:02", "side_effect")],
            "broker_redelivery": [("00:02", "side_effect"), ("00:03", "ack")],
            "retry_after_failure": [("00:02", "side_effect"), ("00:03", "nack")]}
    again = [("00:41", "side_effect"), ("00:42", "ack")]
    steady = [ev("00:00", "enqueue", "p1", idempotency_key="producer_retry"),
              ev("00:00.5", "enqueue", "p2", idempotency_key="producer_retry")]
    steady += run("p1", 1, "w1", "00:00", ends["broker_redelivery"],
                  idempotency_key="producer_retry")
    steady += run("p2", 1, "w2", "00:40", again, idempotency_key="producer_retry")
    for cause, steps in ends.items():
        steady += run(cause, 1, "w1", "00:00", steps, idempotency_key=cause)
        steady += run(cause, 2, "w2", "00:40", again, idempotency_key=cause)
    events += typed("steady", steady)
    # A crash redelivered after the 30 s visibility timeout.
    events += typed("crash.vt", run("c1", 1, "w1", "00:00", [("00:02", "side_effect")])
                    + run("c1", 2, "w2", "00:30", [("00:31", "idempotency_hit"),
                                                   ("00:32", "ack")]),
                    idempotency_key="crash-1")
    # d1 dies holding a 60 s lock; its retry came at 00:30 and got the lock at 01:00.
    events += typed("crash.lock", locked("d1", 1, "w1", "o3", "00:00", 60_000,
                                         [("00:02", "side_effect")], lock_key="lock:dead")
                    + run("d1", 2, "w2", "00:30", [("00:31", "ack")]))
    # g1 dies holding a 20 s lock after its effect; its retry at 00:30 takes the lapsed
    # lock and charges again. Runs of this job type give up on a held lock after 2 s.
    events += typed("crash.gives_up", locked(
        "g1", 1, "w1", "o4", "00:00", 20_000, [("00:02", "side_effect")], lock_key="lock:g")
        + locked("g1", 2, "w2", "o5", "00:30", 20_000, [
            ("00:31", "side_effect"), ("00:32", "lock_release"), ("00:32", "ack")],
            lock_key="lock:g")
        + run("h1", 1, "w3", "02:00", [("02:03", "ack")])
        + [ev("02:02", "lock_contended", "h1", delivery_attempt=1, worker_id="w3",
              lock_key="lock:g", lock_owner="o6", wait_ms=2_000)])
    # Two runs of 20 s and 2 s, no duplicate.
    events += typed("lower.vt", run("f1", 1, "w1", "00:00", [("00:20", "ack")])
                    + run("f2", 1, "w1", "01:00", [("01:02", "ack")]))
    return events


@pytest.fixture(scope="module", params=["embedded", "chdb"])
def told(request, tmp_path_factory):
    """The stories in one store of each kind: the same answers on DuckDB and chDB."""
    folder = tmp_path_factory.mktemp(f"whatif-{request.param}")
    opened = (EmbeddedStore(folder / "store") if request.param == "embedded"
              else ChdbStore(str(folder / "chdb")))
    opened.write(events_to_table(stories()))
    yield opened
    opened.close()


def test_a_redelivery_goes_away_when_the_earlier_run_fits_the_new_timeout(told) -> None:
    answer = whatif(told, Settings(visibility_timeout_ms=60_000), job_type="vt.redelivered")
    row = only(answer.summary)
    assert (row["duplicates_before"], row["duplicates_after"]) == (1, 0)
    assert (row["harmful_before"], row["harmful_after"], row["runs_avoided"]) == (1, 0, 1)
    assert only(answer.keys)["change"] == "no longer a duplicate"


def test_a_run_longer_than_even_the_new_timeout_is_still_redelivered(told) -> None:
    answer = whatif(told, Settings(visibility_timeout_ms=35_000), job_type="vt.redelivered")
    row = only(answer.summary)
    assert (row["duplicates_after"], row["harmful_after"], row["still_overrunning"]) == (1, 1, 1)
    assert answer.keys.empty


def test_a_heartbeat_keeps_a_living_run_from_being_redelivered(told) -> None:
    row = only(whatif(told, Settings(heartbeat_ms=10_000), job_type="vt.redelivered").summary)
    assert (row["duplicates_before"], row["duplicates_after"]) == (1, 0)


def test_a_redelivery_after_a_silent_attempt_is_kept_and_said(told) -> None:
    answer = whatif(told, Settings(visibility_timeout_ms=60_000), job_type="vt.silent")
    assert only(answer.summary)["duplicates_after"] == 1
    assert any("went silent" in line for line in answer.cannot_know)


def test_a_lock_valid_for_the_whole_run_absorbs_the_run_that_took_it(told) -> None:
    longer = only(whatif(told, Settings(lock_ttl_ms=30_000), job_type="lock.taken").summary)
    assert (longer["duplicates_after"], longer["harmful_before"], longer["harmful_after"],
            longer["effects_absorbed"]) == (1, 1, 0, 1)
    short = only(whatif(told, Settings(lock_ttl_ms=15_000), job_type="lock.taken").summary)
    assert (short["harmful_after"], short["still_overrunning"]) == (1, 1)


def test_causes_no_limit_explains_happen_whatever_the_limits(told) -> None:
    answer = whatif(told, Settings(visibility_timeout_ms=120_000, lock_ttl_ms=120_000),
                    job_type="steady")
    assert dict(zip(answer.causes["cause"], answer.causes["after"], strict=True)) == {
        "producer_retry": 1, "worker_crash": 1, "broker_redelivery": 1,
        "retry_after_failure": 1}
    row = only(answer.summary)
    assert (row["duplicates_after"], row["harmful_after"]) == (4, 4)


def test_a_crashed_run_waits_the_longer_visibility_timeout(told) -> None:
    row = only(whatif(told, Settings(visibility_timeout_ms=90_000), job_type="crash.vt").summary)
    assert (row["recoveries"], row["added_delay_p50_ms"], row["added_delay_max_ms"]) == (
        1, 60_000.0, 60_000.0)


def test_a_dead_lock_holder_blocks_its_retry_for_the_longer_ttl(told) -> None:
    row = only(whatif(told, Settings(lock_ttl_ms=120_000), job_type="crash.lock").summary)
    assert row["added_delay_max_ms"] == 60_000.0


def test_a_retry_that_would_meet_the_held_lock_gives_up_where_its_kind_does(told) -> None:
    answer = whatif(told, Settings(lock_ttl_ms=60_000), job_type="crash.gives_up")
    row = only(answer.summary)
    assert (row["retries_dropped"], row["recoveries"]) == (1, 0)
    assert (row["harmful_before"], row["harmful_after"], row["duplicates_after"]) == (1, 0, 1)


def test_a_lower_timeout_counts_the_runs_it_would_redeliver(told) -> None:
    row = only(whatif(told, Settings(visibility_timeout_ms=10_000), job_type="lower.vt").summary)
    assert (row["duplicates_before"], row["duplicates_after"], row["new_overruns"]) == (0, 1, 1)


def runs_of_one_visibility_timeout_key(harmful: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`whatif_runs` and `duplicates` rows of one key: two runs of job j1, the second
    redelivered while the first (30 s long) still ran."""
    base = {"key": "k", "job_id": "j1", "job_type": "t", "queue": "q", "terminal": "ack",
            "lost_worker": False, "visibility_timeout_ms": 20_000, "lock_key": None,
            "lock_acquired_us": None, "lock_ttl_ms": None, "lock_valid_until_us": None,
            "lock_released_us": None, "lock_expired_while_running": False,
            "missing_attempts_before": 0, "key_enqueued_jobs": 1, "overlapped_by_uid": None,
            "cause_worker_crash": False, "cause_broker_redelivery": False,
            "cause_retry_after_failure": False, "had_side_effect": True}
    runs = pd.DataFrame([
        {**base, "execution_uid": "a", "start_us": 0, "end_us": 30_000_000,
         "cause_visibility_timeout": False},
        {**base, "execution_uid": "b", "start_us": 21_000_000, "end_us": 40_000_000,
         "cause_visibility_timeout": True},
    ])
    keys = pd.DataFrame([{"key": "k", "job_type": "t", "executions": 2, "harmful": harmful,
                          "producer_retry": False, "visibility_timeout": True,
                          "worker_crash": False, "broker_redelivery": False,
                          "retry_after_failure": False}])
    return runs, keys


def test_a_harm_the_duplicates_answer_does_not_know_stays_unknown() -> None:
    runs, keys = runs_of_one_visibility_timeout_key(None)
    row = only(replay(runs, keys, Settings(visibility_timeout_ms=25_000)).summary)
    assert (row["unknown_harm_before"], row["unknown_harm_after"]) == (1, 1)
    assert (row["harmful_after"], row["duplicates_after"]) == (0, 1)


def test_an_unknown_harm_whose_duplicate_goes_away_is_counted_nowhere() -> None:
    runs, keys = runs_of_one_visibility_timeout_key(None)
    row = only(replay(runs, keys, Settings(visibility_timeout_ms=40_000)).summary)
    assert (row["duplicates_after"], row["harmful_after"], row["unknown_harm_after"]) == (0, 0, 0)


def test_a_heartbeat_must_beat_more_often_than_the_limit() -> None:
    with pytest.raises(ValueError, match="shorter"):
        Settings(visibility_timeout_ms=10_000, heartbeat_ms=10_000)


def test_the_command_prints_one_json_row_per_job_type(serve_events) -> None:
    serve_events(a_visibility_timeout_redelivery())
    result = CliRunner().invoke(main, ["whatif", "--visibility-timeout", "1m",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = orjson.loads(result.output)
    assert (row["job_type"], row["duplicates_after"], row["settings"]["visibility_timeout_ms"]) == (
        "billing.charge", 0, 60_000)
    assert [k["key"] for k in row["keys_changed"]] == ["inv-1"]
    assert row["cannot_know"]


def test_the_command_wants_a_setting(serve_events) -> None:
    serve_events(a_visibility_timeout_redelivery())
    result = CliRunner().invoke(main, ["whatif"])
    assert result.exit_code == 2 and "--visibility-timeout" in result.output
