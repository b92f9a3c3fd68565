"""The checklist, durations and executions: the numbers behind the dashboard's pages."""

from __future__ import annotations

from forensics_cases import ev, run

from queries import checklist, duplicates_over_time, durations, executions

KEY = {"idempotency_key": "inv-1"}


def test_an_execution_carries_its_key_outcome_and_timing(store, make_table) -> None:
    events = [ev("00:00", "enqueue", "j1", **KEY)]
    events += run("j1", 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03.5", "ack")])
    store.write(make_table(events))
    row = executions(store).iloc[0]
    assert (row["key"], row["terminal"], row["duration_ms"], row["had_side_effect"]) == (
        "inv-1", "ack", 2500.0, True)
    assert row["visibility_timeout_ms"] == 30_000


def test_a_span_execution_ends_at_its_span_end(store, make_table) -> None:
    deliver = ev("00:00", "deliver", "j1", delivery_attempt=1, worker_id="w1",
                 execution_id="span-1", **{"span.end_us": 1764504009000000})
    step = ev("00:01", "side_effect", "j1", delivery_attempt=1, worker_id="w1",
              execution_id="span-1")
    store.write(make_table([deliver, step]))
    assert executions(store).iloc[0]["duration_ms"] == 9000.0


def test_durations_report_percentiles_against_the_settings(store, make_table) -> None:
    events = []
    for i, end in enumerate(["00:01", "00:02", "00:03", "00:04", "00:40"]):
        events += run(f"j{i}", 1, "w1", "00:00", [(end, "ack")])
    store.write(make_table(events))
    row = durations(store).iloc[0]
    assert (row["executions"], row["p50_ms"], row["max_ms"]) == (5, 3000.0, 40000.0)
    assert row["visibility_timeout_ms"] == 30_000
    assert row["share_over_visibility"] == 0.2


def test_lock_contention_and_wait_time_per_job_type(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:01", "lock_contended"), ("00:02", "ack")])
    events[1]["wait_ms"] = 250
    events += run("j2", 1, "w1", "00:00", [("00:02", "ack")])
    store.write(make_table(events))
    row = checklist(store)["lock_contention"].iloc[0]
    assert (row["lock_contended"], row["lock_contention_ratio"], row["lock_wait_ms_avg"]) == (
        1, 0.5, 250.0)


def test_redeliveries_and_idempotency_hits_per_job_type(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:01", "side_effect"), ("00:02", "ack")], **KEY)
    events += run("j1", 1, "w2", "00:10", [("00:11", "idempotency_hit"), ("00:12", "ack")], **KEY)
    store.write(make_table(events))
    items = checklist(store)
    assert items["redeliveries"].iloc[0][["messages", "redeliveries"]].tolist() == [1, 1]
    assert items["idempotency"].iloc[0][["idempotency_hits", "new_executions"]].tolist() == [1, 1]


def test_outbox_lag_runs_from_outbox_write_to_enqueue(store, make_table) -> None:
    events = [ev("00:00", "outbox_write", "j1"), ev("00:02.5", "enqueue", "j1")]
    store.write(make_table(events))
    row = checklist(store)["outbox_lag"].iloc[0]
    assert (row["jobs"], row["outbox_lag_ms_max"]) == (1, 2500.0)


def test_a_start_without_a_stop_before_it_is_an_unclean_restart(store, make_table) -> None:
    events = [
        {"ts": "2025-11-30T12:00:00Z", "event": "worker_start", "worker_id": "pod-1",
         "service_version": "v1"},
        {"ts": "2025-11-30T12:01:00Z", "event": "worker_start", "worker_id": "pod-1",
         "service_version": "v2"},
        {"ts": "2025-11-30T12:02:00Z", "event": "worker_start", "worker_id": "pod-1",
         "service_version": "v2"},
    ]
    store.write(make_table(events))
    loops = checklist(store)["crash_loops"]
    v2 = loops[loops["service_version"] == "v2"].iloc[0]
    assert (v2["starts"], v2["unclean_restarts"], v2["version_changes"]) == (2, 2, 1)


def test_a_deliver_before_its_enqueue_shows_clock_skew(store, make_table) -> None:
    events = [ev("00:05", "enqueue", "j1")]
    events += run("j1", 1, "w-slow", "00:03", [("00:04", "ack")])
    events += [ev("00:05", "enqueue", "j2")]
    events += run("j2", 1, "w-ok", "00:06", [("00:07", "ack")])
    store.write(make_table(events))
    skew = checklist(store)["clock_skew"].set_index("worker_id")
    assert (skew.loc["w-slow", "behind_ms"], bool(skew.loc["w-slow", "skewed"])) == (2000.0, True)
    assert not skew.loc["w-ok", "skewed"]


def test_many_runs_on_one_resource_in_a_short_window_is_a_stampede(store, make_table) -> None:
    events = []
    for i in range(10):
        events += run(f"j{i}", 1, f"w{i}", f"00:00.{i}", [("00:01", "ack")],
                      resource_key="report-7")
    for i in range(9):  # one short of a stampede by default: ten runs in ten seconds
        events += run(f"k{i}", 1, f"v{i}", f"00:00.{i}", [("00:01", "ack")],
                      resource_key="report-8")
    store.write(make_table(events))
    stampedes = checklist(store)["cache_stampedes"]
    assert stampedes[["resource_key", "executions"]].values.tolist() == [["report-7", 10]]


def test_duplicates_over_time_counts_a_key_in_its_first_bucket(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY)
    events += run("j2", 1, "w2", "00:40", [("00:41", "ack")])
    store.write(make_table(events))
    row = duplicates_over_time(store, bucket="1h").iloc[0]
    assert str(row["bucket"]) == "2025-11-30 12:00:00+00:00"
    assert row[["keys", "duplicate_keys", "extra_executions", "harmful", "absorbed"]].tolist() == [
        2, 1, 1, 1, 0]
