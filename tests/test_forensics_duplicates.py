"""Duplicates: which keys ran more than once, harmful or absorbed, and why."""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from forensics_cases import ev, run

import sample_data
from queries import duplicates
from queries.derived import answer_changes
from queries.duplicates_shape import sorted_job_ids
from queries.duplicates_table import duplicates_arrow
from queries.forensics import replaced_in_order, sorted_lists
from store.embedded import EmbeddedStore

KEY = {"idempotency_key": "inv-1"}


def only(frame):
    assert len(frame) == 1, frame
    return frame.iloc[0]


def test_a_key_that_ran_once_is_not_a_duplicate(store, make_table) -> None:
    events = [ev("00:00", "enqueue", "j1", **KEY)]
    events += run("j1", 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
    store.write(make_table(events))
    assert duplicates(store).empty


def test_two_job_ids_for_one_key_is_a_producer_retry(store, make_table) -> None:
    events = [ev("00:00", "enqueue", "j1", **KEY), ev("00:00.5", "enqueue", "j2", **KEY)]
    events += run("j1", 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
    events += run("j2", 1, "w2", "00:01", [("00:02", "idempotency_hit"), ("00:03", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["key"], row["cause"], row["job_ids"]) == ("inv-1", "producer_retry", ["j1", "j2"])


def test_redelivery_while_still_running_is_a_visibility_timeout(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "idempotency_hit"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["cause"], row["causes"]) == ("visibility_timeout", ["visibility_timeout"])


def test_celery_redelivery_without_attempt_numbers_still_counts_two_runs(
    store, make_table
) -> None:
    events = run("j1", None, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", None, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["executions"], row["cause"], row["harmful"]) == (2, "visibility_timeout", True)


def test_redelivery_after_a_silent_attempt_is_a_worker_crash(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY)
    store.write(make_table(events))
    assert only(duplicates(store))["cause"] == "worker_crash"


def test_a_nack_settled_for_a_lost_worker_is_a_worker_crash(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events.append(
        ev("00:20", "nack", "j1", delivery_attempt=1, worker_id="w1", reason="WorkerLostError",
           settled_by="celery-main", **KEY)
    )
    events += run("j1", 2, "w2", "00:40", [("00:42", "ack")], **KEY)
    store.write(make_table(events))
    assert only(duplicates(store))["cause"] == "worker_crash"


def test_a_later_attempt_whose_predecessors_left_no_events_is_a_worker_crash(
    store, make_table
) -> None:
    events = run("j1", 3, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["cause"], row["executions"]) == ("worker_crash", 3)


def test_delivery_after_an_ack_is_a_broker_redelivery(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
    events += run("j1", 1, "w2", "00:10", [("00:11", "idempotency_hit"), ("00:12", "ack")], **KEY)
    store.write(make_table(events))
    assert only(duplicates(store))["cause"] == "broker_redelivery"


def test_a_run_after_its_own_failure_is_a_retry_after_failure(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "fail")], **KEY)
    events += run("j1", 2, "w1", "00:10", [("00:11", "side_effect"), ("00:12", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["cause"], row["harmful"], row["side_effects"]) == (
        "retry_after_failure", True, 2)


def test_the_first_cause_in_priority_order_wins_and_all_are_listed(store, make_table) -> None:
    events = [ev("00:00", "enqueue", "j1", **KEY), ev("00:00", "enqueue", "j2", **KEY)]
    events += run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:10", [("00:11", "idempotency_hit"), ("00:12", "ack")], **KEY)
    events += run("j2", 1, "w3", "00:20", [("00:21", "idempotency_hit"), ("00:22", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert row["cause"] == "producer_retry"
    assert row["causes"] == ["producer_retry", "broker_redelivery"]


def test_extras_that_skipped_the_effect_are_absorbed(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "idempotency_hit"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["harmful"], row["side_effects"], row["executions"]) == (False, 1, 2)


def test_a_duplicate_whose_runs_said_nothing_of_the_effect_has_an_unknown_outcome(
    store, make_table
) -> None:
    # What a source without effect events (Celery's event stream, its worker logs) sees.
    events = run("j1", None, "w1", "00:00", [("00:40", "ack")], **KEY)
    events += run("j1", None, "w2", "00:31", [("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["outcome"], row["side_effects"]) == ("unknown", 0)
    assert row["harmful"] is pd.NA


@pytest.mark.parametrize("evidence", ["side_effect", "idempotency_hit", "lock_contended",
                                      "occ_conflict", "commit"])
def test_one_run_that_reported_its_effect_makes_the_outcome_known(
    store, make_table, evidence
) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", evidence), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["outcome"], bool(row["harmful"])) == ("absorbed", False)


def test_two_runs_that_ran_the_effect_are_harmful_whatever_else_they_said(
    store, make_table
) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert (row["outcome"], bool(row["harmful"])) == ("harmful", True)


def test_the_outcome_is_printed_beside_harmful_null_when_unknown(store, make_table) -> None:
    events = run("j1", None, "w1", "00:00", [("00:40", "ack")])
    events += run("j1", None, "w2", "00:31", [("00:33", "ack")])
    events += run("j2", 1, "w1", "00:00", [("00:01", "side_effect"), ("00:02", "ack")])
    events += run("j2", 2, "w1", "00:10", [("00:11", "idempotency_hit"), ("00:12", "ack")])
    store.write(make_table(events))
    table = duplicates_arrow(store)
    rows = {r["key"]: (r["harmful"], r["outcome"]) for r in table.to_pylist()}
    assert rows == {"j1": (None, "unknown"), "j2": (False, "absorbed")}


def test_the_idempotency_key_on_one_event_names_the_whole_job(store, make_table) -> None:
    events = [ev("00:00", "enqueue", "j1", **KEY)]
    events += run("j1", 1, "w1", "00:01", [("00:02", "side_effect")])
    events += run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")])
    store.write(make_table(events))
    assert only(duplicates(store))["key"] == "inv-1"


def test_a_job_without_idempotency_key_is_keyed_by_its_job_id(store, make_table) -> None:
    events = run("j9", 1, "w1", "00:00", [("00:02", "side_effect")])
    events += run("j9", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")])
    store.write(make_table(events))
    assert only(duplicates(store))["key"] == "j9"


def test_ingesting_the_same_events_again_changes_nothing(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    store.write(make_table(events))
    before = duplicates(store)
    store.write(make_table(events))
    after = duplicates(store)
    assert after.to_dict(orient="records") == before.to_dict(orient="records")
    assert after.iloc[0]["executions"] == 2


def test_filters_select_executions(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], queue="q1", **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:42", "ack")], queue="q1", **KEY)
    store.write(make_table(events))
    assert len(duplicates(store, job_type="billing.charge", queue="q1")) == 1
    assert duplicates(store, job_type="mail.send").empty
    assert duplicates(store, queue="other").empty
    assert duplicates(store, since="2025-11-30T12:00:30Z").empty
    assert duplicates(store, until="2025-11-30T12:00:30Z").empty
    assert len(duplicates(store, since="2025-11-30T11:00:00Z", until="2025-11-30T13:00Z")) == 1


def test_times_are_utc_timestamps(store, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:42", "ack")], **KEY)
    store.write(make_table(events))
    row = only(duplicates(store))
    assert str(row["first_ts"]) == "2025-11-30 12:00:00+00:00"
    assert str(row["last_ts"]) == "2025-11-30 12:00:42+00:00"


def test_each_key_s_job_ids_are_listed_sorted_without_nulls() -> None:
    lists = pa.chunked_array(
        [
            pa.array([["j2", None, "j1"], None, ["é", "e", "z"]], pa.list_(pa.string())),
            pa.array([[], [None], ["only"]], pa.list_(pa.string())),
        ]
    )
    assert sorted_lists(lists) == [["j1", "j2"], [], ["e", "z", "é"], [], [], ["only"]]


def test_the_arrow_shape_lists_job_ids_sorted_without_nulls_too() -> None:
    lists = [["j2", None, "j1"], None, ["é", "e", "z"], [], [None], ["only"]]
    frame = pl.DataFrame({"_row": range(len(lists)), "job_ids": lists},
                         schema={"_row": pl.Int64, "job_ids": pl.List(pl.String)})
    assert sorted_job_ids(frame)["job_ids"].to_list() == [
        ["j1", "j2"], [], ["e", "z", "é"], [], [], ["only"]]


def test_no_keys_give_no_job_id_lists() -> None:
    assert sorted_lists(pa.chunked_array([], pa.list_(pa.string()))) == []


def twice(job: str, key: str, start: str) -> list[dict]:
    """Job `job` of key `key` delivered twice from `start` (minute and second), both
    runs acknowledged."""
    minute = int(start[:2])
    return (run(job, 1, "w1", f"{minute:02d}:00", [(f"{minute:02d}:01", "ack")],
                idempotency_key=key)
            + run(job, 2, "w2", f"{minute:02d}:40", [(f"{minute:02d}:41", "ack")],
                  idempotency_key=key))


def look_again(store) -> None:
    """What a reader does on its next refresh: look at the store's newest snapshot."""
    if isinstance(store, EmbeddedStore):
        store.forget_snapshot()


def test_a_reader_that_listed_the_duplicates_reads_only_the_keys_a_batch_replaced(
    store, make_table
) -> None:
    store.write(make_table(twice("j1", "a", "01") + twice("j2", "b", "02")))
    before = answer_changes(store, "answer_duplicates", None).mark
    assert before is not None
    store.write(make_table(twice("j3", "c", "03")))
    look_again(store)
    changes = answer_changes(store, "answer_duplicates", before)
    assert changes.mark != before
    # The batch's key (and its job_id, a key of its own if it had none): not a's or b's.
    assert changes.keys is not None and "c" in changes.keys <= {"c", "j3"}
    assert changes.rows is not None and changes.rows["key"].to_pylist() == ["c"]


def test_the_duplicates_listed_again_follow_each_batch_in_order(store, make_table) -> None:
    store.write(make_table(twice("j2", "b", "02") + twice("j3", "c", "03")))
    assert list(duplicates(store)["key"]) == ["b", "c"]
    late = run("j2", 3, "w3", "02:50", [("02:51", "ack")], idempotency_key="b")
    store.write(make_table(twice("j1", "a", "01") + late))
    look_again(store)
    listed = duplicates(store)
    assert list(listed["key"]) == ["a", "b", "c"]
    assert list(listed["executions"]) == [2, 3, 2]
    store.write(make_table([ev("03:59", "commit", "j3", idempotency_key="d")]))
    look_again(store)
    assert list(duplicates(store)["key"]) == ["a", "b", "d"]  # j3 now runs for d


def test_the_arrow_shape_of_the_duplicates_holds_the_frame_s_values(store, make_table) -> None:
    """What the command line prints every duplicate from (duplicates_arrow) is the frame,
    value for value, over the workload model's mix of causes, outcomes and lock findings."""
    workload = sample_data.generate(seed=3, target_events=3000, hours=0.5)
    store.write(make_table([orjson.loads(line) for line in workload.jsonl_bytes().splitlines()]))
    frame = duplicates(store)
    assert len(frame) > 10 and frame["cause"].nunique() > 2
    assert duplicates_arrow(store).to_pylist() == frame.to_dict(orient="records")


def test_rows_replaced_in_a_listing_take_their_places_in_its_order() -> None:
    def listing(*rows: tuple[str, str]) -> pd.DataFrame:
        return pd.DataFrame({"key": [k for k, _ in rows],
                             "first_ts": pd.to_datetime([f"2026-12-01T{t}:00" for _, t in rows],
                                                        utc=True)})

    held = listing(("b", "10:00"), ("d", "10:00"), ("a", "11:00"), ("c", "12:00"))
    fresh = listing(("e", "12:30"), ("c", "10:00"), ("a", "09:00"), ("z", "10:00"))
    replaced = replaced_in_order(held, frozenset({"a", "c", "e", "gone"}), fresh)
    assert list(replaced["key"]) == ["a", "b", "c", "d", "z", "e"]
    emptied = replaced_in_order(held, frozenset({"a", "b", "c", "d"}), fresh.iloc[:0])
    assert list(emptied["key"]) == []
    # New keys later than every held row are appended; a tie with the last row is ordered
    # by key all the same.
    later = listing(("f", "13:00"), ("a0", "12:00"), ("e", "12:30"))
    appended = replaced_in_order(held, frozenset({"f", "a0", "e"}), later)
    assert list(appended["key"]) == ["b", "d", "a", "a0", "c", "e", "f"]
    assert list(appended.index) == list(range(7))
    newest = replaced_in_order(held, frozenset({"f", "e"}), later.iloc[[0, 2]])
    assert list(newest["key"]) == ["b", "d", "a", "c", "e", "f"]


def test_rows_replaced_in_a_listing_equal_a_listing_sorted_again() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        size = int(rng.integers(0, 40))
        held = pd.DataFrame({
            "key": pd.Series([f"k{i:03d}" for i in range(size)], dtype="str"),
            "first_ts": pd.to_datetime(rng.integers(0, 10, size), unit="m", utc=True),
        }).sort_values(["first_ts", "key"], ignore_index=True)
        keys = {f"k{i:03d}" for i in rng.integers(0, 60, int(rng.integers(0, 12)))}
        kept_keys = sorted(k for k in keys if rng.random() < 0.6)
        fresh = pd.DataFrame({
            "key": pd.Series(kept_keys, dtype="str"),
            "first_ts": pd.to_datetime(rng.integers(0, 12, len(kept_keys)), unit="m", utc=True),
        })
        expected = pd.concat([held[~held["key"].isin(keys)], fresh], ignore_index=True)
        expected = expected.sort_values(["first_ts", "key"], ignore_index=True)
        replaced = replaced_in_order(held, frozenset(keys), fresh)
        assert replaced.to_dict("list") == expected.to_dict("list")


def test_a_listing_handed_out_is_the_caller_s_to_change(store, make_table) -> None:
    store.write(make_table(run("j1", 1, "w1", "00:01", [("00:02", "side_effect")], **KEY)
                           + run("j1", 2, "w2", "00:40", [("00:41", "side_effect")], **KEY)))
    handed = duplicates(store)
    handed.loc[0, "key"] = "changed"
    handed["extra"] = 1
    again = duplicates(store)
    assert list(again["key"]) == ["inv-1"] and "extra" not in again.columns
