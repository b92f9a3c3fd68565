"""The yardstick of the Celery scenario: the truth it derives from its ledger, and how a
source's duplicate rows are scored against it."""

from __future__ import annotations

from celery_world.ledger import Entry
from celery_world.truth import build
from support.scoring import score


def runs(key: str, task_id: str, *spans: tuple[float, float | None]) -> list[Entry]:
    """Ledger lines for runs of one task: (effect time, done time or None if killed)."""
    out = []
    for i, (effect_t, done_t) in enumerate(spans):
        run = f"{task_id}-{i}"
        out.append(Entry("effect", key, task_id, run, f"w{i}", 100 + i, effect_t))
        if done_t is not None:
            out.append(Entry("done", key, task_id, run, f"w{i}", 100 + i, done_t))
    return out


def sent(*items: tuple[str, str, str]) -> list[dict]:
    return [{"key": k, "task_id": t, "behaviour": b} for k, t, b in items]


def test_the_truth_names_each_fault_by_its_cause() -> None:
    entries = (
        runs("normal", "j0", (0.0, 0.1))
        + runs("crashed", "j1", (0.0, None), (5.0, 5.1))
        + runs("outlived", "j2", (0.0, 6.0), (4.0, 4.1))
        + runs("resent", "j3", (0.0, 1.0))
        + runs("resent", "j4", (0.3, 1.3))
    )
    truth = build(entries, [], ["w0"])
    assert truth.by_key == {
        "crashed": "worker_crash",
        "outlived": "visibility_timeout",
        "resent": "producer_retry",
    }


def test_a_producer_retry_is_no_duplicate_where_the_key_is_the_job_id() -> None:
    entries = runs("resent", "j3", (0.0, 1.0)) + runs("resent", "j4", (0.3, 1.3))
    truth = build(entries, sent(("resent", "j3", "slow"), ("resent", "j4", "slow")), [])
    assert truth.by_job_id == {}
    assert truth.unlinkable == {"resent"}


def test_the_plan_says_what_each_injected_fault_should_cause() -> None:
    truth = build([], sent(("a", "j1", "normal"), ("b", "j2", "crash"), ("c", "j3", "outlive")), [])
    assert truth.planned == {"b": "worker_crash", "c": "visibility_timeout"}


def test_a_run_done_before_the_next_began_is_a_broker_redelivery() -> None:
    truth = build(runs("k", "j1", (0.0, 0.1), (5.0, 5.1)), [], [])
    assert truth.by_job_id == {"j1": "broker_redelivery"}


def test_precision_counts_every_reported_key_that_did_not_run_twice() -> None:
    rows = [{"key": "a", "cause": "worker_crash"}, {"key": "n1", "cause": "unknown"}]
    result = score(rows, {"a": "worker_crash", "b": "producer_retry"})
    assert (result.precision, result.recall, result.cause_accuracy) == (0.5, 0.5, 1.0)
    assert (result.false_positives, result.missed) == (["n1"], ["b"])


def test_cause_accuracy_judges_only_the_causes_the_source_can_carry() -> None:
    rows = [{"key": "a", "cause": "worker_crash"}, {"key": "b", "cause": "unknown"}]
    truth = {"a": "visibility_timeout", "b": "producer_retry"}
    result = score(rows, truth, evidence={"visibility_timeout", "worker_crash"})
    assert (result.cause_judged, result.cause_right) == (1, 0)
    assert result.wrong_causes == {"a": ("worker_crash", "visibility_timeout")}


def test_a_source_that_reports_nothing_finds_nothing() -> None:
    result = score([], {"a": "worker_crash"})
    assert (result.reported, result.recall) == (0, 0.0)
