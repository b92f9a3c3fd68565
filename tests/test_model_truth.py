"""Invariants of the ground truth, and its agreement with the emitted events."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

import sample_data
from sample_data.truth import CAUSES


@pytest.fixture(scope="module")
def workload() -> sample_data.Workload:
    return sample_data.generate(seed=5, target_events=8000)


def test_harmful_iff_two_side_effects(workload: sample_data.Workload) -> None:
    for d in workload.truth["duplicates"]:
        assert (d["outcome"] == "harmful") == (d["side_effects"] >= 2)
        if d["outcome"] != "unknown":
            assert d["harmful"] == (d["side_effects"] >= 2)


def test_an_outcome_is_unknown_only_where_no_run_reported_its_effect(
    workload: sample_data.Workload,
) -> None:
    for d in workload.truth["duplicates"]:
        assert d["outcome"] in ("harmful", "absorbed", "unknown")
        assert (d["harmful"] is None) == (d["outcome"] == "unknown")
        if d["side_effects"]:
            assert d["outcome"] != "unknown"  # a side effect is evidence


def test_duplicates_have_two_executions(workload: sample_data.Workload) -> None:
    assert workload.truth["duplicates"]
    assert all(d["executions"] >= 2 for d in workload.truth["duplicates"])


def test_causes_use_contract_vocabulary_in_priority_order(workload: sample_data.Workload
                                                          ) -> None:
    for d in workload.truth["duplicates"]:
        assert d["causes"] and set(d["causes"]) <= set(CAUSES)
        assert d["causes"] == sorted(d["causes"], key=CAUSES.index)
        assert d["cause"] == d["causes"][0]


def test_execution_counts_match_deliver_events(workload: sample_data.Workload) -> None:
    delivers = Counter(e.get("idempotency_key") or e["job_id"]
                       for e in workload.events if e["event"] == "deliver")
    truth = {d["key"]: d["executions"] for d in workload.truth["duplicates"]}
    assert truth == {k: n for k, n in delivers.items() if n > 1}


def test_side_effect_counts_match_events(workload: sample_data.Workload) -> None:
    effects: dict[str, int] = defaultdict(int)
    for e in workload.events:
        if e["event"] == "side_effect":
            effects[e.get("idempotency_key") or e["job_id"]] += 1
    for d in workload.truth["duplicates"]:
        assert d["side_effects"] == effects[d["key"]]


def test_events_are_sorted_and_have_no_nulls(workload: sample_data.Workload) -> None:
    ts = [e["ts"] for e in workload.events]
    assert ts == sorted(ts)
    assert all(v is not None for e in workload.events for v in e.values())
    assert workload.truth["events"] == len(workload.events)


def test_celery_jobs_have_no_delivery_attempt(workload: sample_data.Workload) -> None:
    celery = [e for e in workload.events if e.get("queue") == "celery" and e["event"] == "deliver"]
    assert celery and all("delivery_attempt" not in e for e in celery)
