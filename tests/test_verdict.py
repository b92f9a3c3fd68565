"""Executions and the verdict on one key, as queries/ reads them off its timeline.

The dashboard's timeline page and `dupescope timeline` both show these; the dashboard's
store (tests/dashboard_cases.py) holds one story per key.
"""

from __future__ import annotations

import pandas as pd
from dashboard_cases import ABSORBED_KEY, HARMFUL_KEY, SINGLE_KEY

from queries.key_executions import overlaps, summarise
from queries.verdict import verdict


def _timeline(store, key: str) -> pd.DataFrame:
    import queries

    return queries.timeline(store, key)


def _row(store, key: str) -> dict:
    import queries

    found = queries.duplicates(store)
    return found[found["key"] == key].iloc[0].to_dict()


def test_summary_says_how_each_execution_ended(stories) -> None:
    runs = summarise(_timeline(stories, HARMFUL_KEY))
    assert runs["outcome"].tolist() == ["silent", "ack"]
    assert runs["side_effect"].tolist() == [True, True]
    assert runs["worker_id"].tolist() == ["w1:101", "w2:202"]
    assert runs["lock_valid_until"].iloc[0] == pd.Timestamp("2025-11-30T12:00:11.2Z")


def test_overlap_is_found_only_where_runs_share_time(stories) -> None:
    assert overlaps(summarise(_timeline(stories, HARMFUL_KEY))) == []
    (begin, finish, one, other), = overlaps(summarise(_timeline(stories, ABSORBED_KEY)))
    assert (one, other) == (1, 2)
    assert begin == pd.Timestamp("2025-11-30T12:01:31Z")
    assert finish == pd.Timestamp("2025-11-30T12:01:32Z")


def test_verdict_for_a_harmful_worker_crash(stories) -> None:
    said = verdict(summarise(_timeline(stories, HARMFUL_KEY)), _row(stories, HARMFUL_KEY))
    assert said.harmful is True and said.cause == "worker_crash"
    assert said.text == (
        "Delivered twice because the first worker (w1:101) went silent after its side effect; "
        "the second execution ran the effect again: harmful."
    )


def test_verdict_for_an_absorbed_visibility_timeout(stories) -> None:
    said = verdict(summarise(_timeline(stories, ABSORBED_KEY)), _row(stories, ABSORBED_KEY))
    assert said.harmful is False
    assert said.text == (
        "Delivered twice because the visibility timeout (30 s) ran out while the first "
        "execution was still running (it ran 31 s); the second execution found the "
        "idempotency record and skipped the effect: absorbed."
    )


def test_verdict_for_a_single_run_and_for_no_forensic_answer(stories) -> None:
    assert verdict(summarise(_timeline(stories, SINGLE_KEY))).text == (
        "Ran once and ran its side effect: not a duplicate."
    )
    unclassified = verdict(summarise(_timeline(stories, HARMFUL_KEY)), None)
    assert unclassified.harmful is True
    assert unclassified.text.startswith("Ran twice for a reason the events do not show")
    assert "no forensic answer" in unclassified.text


def test_verdict_for_a_producer_retry_and_a_failed_retry() -> None:
    runs = pd.DataFrame(
        {
            "execution": [1, 2], "job_id": ["a", "b"], "worker_id": ["w1", "w2"],
            "delivery_attempt": [1, 1], "duration_ms": [10.0, 10.0],
            "side_effect": [True, False], "absorbed_by": [None, "lock_contended"],
            "outcome": ["ack", "ack"], "reason": [None, None], "settled_by": [None, None],
            "visibility_timeout_ms": [None, None],
        }
    )
    said = verdict(runs, {"cause": "producer_retry", "harmful": False})
    assert said.text == (
        "Ran twice because the producer enqueued it twice as separate jobs; the second "
        "execution could not take the lock and did not run the effect: absorbed."
    )
    failed = runs.assign(outcome=["fail", "ack"], reason=["timeout", None],
                         side_effect=[True, True])
    said = verdict(failed, {"cause": "retry_after_failure", "harmful": True})
    assert said.text == (
        "Ran twice because the first execution failed after its side effect (timeout) and "
        "was retried; the second execution ran the effect again: harmful."
    )


def test_no_execution_at_all() -> None:
    assert verdict(summarise(pd.DataFrame())).harmful is None


def test_verdict_when_only_the_retry_ran_the_effect() -> None:
    runs = pd.DataFrame(
        {
            "execution": [1, 2], "job_id": ["a", "a"], "worker_id": ["w1", "w2"],
            "delivery_attempt": [1, 2], "duration_ms": [10.0, 10.0],
            "side_effect": [False, True], "absorbed_by": [None, None],
            "outcome": ["nack", "ack"], "reason": ["deadlock", None], "settled_by": [None, None],
            "visibility_timeout_ms": [None, None],
        }
    )
    said = verdict(runs, {"cause": "retry_after_failure", "harmful": False})
    assert said.text == (
        "Ran twice because the first execution failed (deadlock) and was retried; only the "
        "second execution ran the effect: absorbed."
    )
