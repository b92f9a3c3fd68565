"""The what-if replay's rules, one small story per cause, on DuckDB and chDB alike."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest
from click.testing import CliRunner
from forensics_cases import ev, locked, run

from dupescope.cli import main
from queries.whatif import Settings, replay, whatif

KEY = {"idempotency_key": "inv-1"}


def only(frame: pd.DataFrame) -> dict:
    assert len(frame) == 1, frame
    return frame.iloc[0].to_dict()


def a_visibility_timeout_redelivery() -> list[dict]:
    """j1 runs 40 s under a 30 s visibility timeout; its redelivery at 31 s runs the
    effect again."""
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    return events


def test_a_redelivery_goes_away_when_the_earlier_run_fits_the_new_timeout(
    store, make_table
) -> None:
    store.write(make_table(a_visibility_timeout_redelivery()))
    answer = whatif(store, Settings(visibility_timeout_ms=60_000))
    row = only(answer.summary)
    assert (row["duplicates_before"], row["duplicates_after"]) == (1, 0)
    assert (row["harmful_before"], row["harmful_after"], row["runs_avoided"]) == (1, 0, 1)
    assert only(answer.keys)["change"] == "no longer a duplicate"


def test_a_run_longer_than_even_the_new_timeout_is_still_redelivered(store, make_table) -> None:
    store.write(make_table(a_visibility_timeout_redelivery()))
    answer = whatif(store, Settings(visibility_timeout_ms=35_000))
    row = only(answer.summary)
    assert (row["duplicates_after"], row["harmful_after"], row["still_overrunning"]) == (1, 1, 1)
    assert answer.keys.empty


def test_a_heartbeat_keeps_a_living_run_from_being_redelivered(store, make_table) -> None:
    store.write(make_table(a_visibility_timeout_redelivery()))
    row = only(whatif(store, Settings(heartbeat_ms=10_000)).summary)
    assert (row["duplicates_before"], row["duplicates_after"]) == (1, 0)


def test_a_redelivery_after_a_silent_attempt_is_kept_and_said(store, make_table) -> None:
    """The earlier attempt said nothing after 00:35: crashed or ran on, nobody knows."""
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:35", "commit")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    answer = whatif(store, Settings(visibility_timeout_ms=60_000))
    assert only(answer.summary)["duplicates_after"] == 1
    assert any("went silent" in line for line in answer.cannot_know)


def test_a_lock_valid_for_the_whole_run_absorbs_the_run_that_took_it(store, make_table) -> None:
    """Two job_ids for one key (a producer retry); j1's 5 s lock lapses while it runs to
    00:20, j2 takes it at 00:10 and runs the effect too."""
    events = [ev("00:00", "enqueue", "j1", **KEY), ev("00:00.5", "enqueue", "j2", **KEY)]
    events += [dict(e, **KEY) for e in locked(
        "j1", 1, "w1", "o1", "00:00", 5_000,
        [("00:01", "side_effect"), ("00:20", "lock_release"), ("00:20", "ack")])]
    events += [dict(e, **KEY) for e in locked(
        "j2", 1, "w2", "o2", "00:10", 5_000,
        [("00:11", "side_effect"), ("00:12", "lock_release"), ("00:12", "ack")])]
    store.write(make_table(events))
    longer = only(whatif(store, Settings(lock_ttl_ms=30_000)).summary)
    assert (longer["duplicates_after"], longer["harmful_before"], longer["harmful_after"],
            longer["effects_absorbed"]) == (1, 1, 0, 1)
    short = only(whatif(store, Settings(lock_ttl_ms=15_000)).summary)
    assert (short["harmful_after"], short["still_overrunning"]) == (1, 1)


def test_causes_no_limit_explains_happen_whatever_the_limits(store, make_table) -> None:
    """One key per cause: a producer retry, a crash, an ack the broker lost, a nack."""
    ends = {"worker_crash": [("00:02", "side_effect")],
            "broker_redelivery": [("00:02", "side_effect"), ("00:03", "ack")],
            "retry_after_failure": [("00:02", "side_effect"), ("00:03", "nack")]}
    again = [("00:41", "side_effect"), ("00:42", "ack")]
    events = [ev("00:00", "enqueue", "p1", idempotency_key="producer_retry"),
              ev("00:00.5", "enqueue", "p2", idempotency_key="producer_retry")]
    events += run("p1", 1, "w1", "00:00", ends["broker_redelivery"],
                  idempotency_key="producer_retry")
    events += run("p2", 1, "w2", "00:40", again, idempotency_key="producer_retry")
    for cause, steps in ends.items():
        events += run(cause, 1, "w1", "00:00", steps, idempotency_key=cause)
        events += run(cause, 2, "w2", "00:40", again, idempotency_key=cause)
    store.write(make_table(events))
    answer = whatif(store, Settings(visibility_timeout_ms=120_000, lock_ttl_ms=120_000))
    assert dict(zip(answer.causes["cause"], answer.causes["after"], strict=True)) == {
        "producer_retry": 1, "worker_crash": 1, "broker_redelivery": 1,
        "retry_after_failure": 1}
    row = only(answer.summary)
    assert (row["duplicates_after"], row["harmful_after"]) == (4, 4)


def test_a_crashed_run_waits_the_longer_visibility_timeout(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:30", [("00:31", "idempotency_hit"), ("00:32", "ack")],
                  **KEY)
    store.write(make_table(events))
    row = only(whatif(store, Settings(visibility_timeout_ms=90_000)).summary)
    assert (row["recoveries"], row["added_delay_p50_ms"], row["added_delay_max_ms"]) == (
        1, 60_000.0, 60_000.0)


def test_a_dead_lock_holder_blocks_its_retry_for_the_longer_ttl(store, make_table) -> None:
    """j1 dies holding a 60 s lock; the retry came at 00:30 and got the lock at 01:00."""
    events = locked("j1", 1, "w1", "o1", "00:00", 60_000, [("00:02", "side_effect")])
    events += run("j1", 2, "w2", "00:30", [("00:31", "ack")])
    store.write(make_table(events))
    row = only(whatif(store, Settings(lock_ttl_ms=120_000)).summary)
    assert row["added_delay_max_ms"] == 60_000.0


def test_a_lower_timeout_counts_the_runs_it_would_redeliver(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:20", "ack")], **KEY)
    events += run("j2", 1, "w1", "01:00", [("01:02", "ack")], idempotency_key="inv-2")
    store.write(make_table(events))
    row = only(whatif(store, Settings(visibility_timeout_ms=10_000)).summary)
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
