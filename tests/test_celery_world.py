"""Celery as its users run it: real prefork workers on real Redis and RabbitMQ, a worker
SIGKILLed before its ack, a task outliving the visibility timeout, a producer resending
after a timeout, and many normal tasks. Each source alone must name the keys that truly
ran more than once, and why (see tests/celery_world)."""

from __future__ import annotations

import pytest
from support.scoring import harm, score

#: What spans without an idempotency key can tell: their key is the job_id, so a producer
#: retry (two job_ids) is out of their reach.
JOB_ID_EVIDENCE = {"visibility_timeout", "worker_crash"}
#: What Celery's worker logs can tell (docs/celery-logs.md): every cause but a producer
#: retry, which needs a key the logs do not carry.
LOG_EVIDENCE = {"visibility_timeout", "worker_crash", "broker_redelivery", "retry_after_failure"}


def explained(world, source: str, result) -> str:
    """The score, with what the collector read past and where the run's files are."""
    metrics = world.collector_metrics.get(source, {})
    ignored = metrics.get("dupescope_collector_ignored_spans_total")
    return f"{source} on {world.broker}: {result.summary()}; spans ignored {ignored}; " \
        f"logs and ledger in {world.folder}"


def test_the_scenario_injected_every_fault(celery_world) -> None:
    truth = celery_world.truth
    assert truth.by_key == truth.planned
    assert truth.killed_nodes
    assert len(truth.keys) > 3 * len(truth.by_key)  # mostly normal tasks, run once


def test_dupescope_instrumentation_names_the_duplicates_and_their_causes(celery_world) -> None:
    result = score(celery_world.duplicates("dupescope"), celery_world.truth.by_key)
    why = explained(celery_world, "dupescope", result)
    assert result.precision >= 0.99, why
    assert result.recall >= 0.99, why
    assert result.cause_accuracy >= 0.95, why


def test_celery_instrumentor_spans_name_the_duplicates_and_their_causes(celery_world) -> None:
    # The crashed worker's spans are lost, as in production: its batch was never exported.
    truth = celery_world.truth
    result = score(celery_world.duplicates("otel"), truth.by_job_id, JOB_ID_EVIDENCE)
    why = explained(celery_world, "otel", result)
    assert result.precision >= 0.99, why
    assert result.recall >= 0.99, why
    assert result.cause_accuracy >= 0.95, why


def test_the_event_stream_finds_the_keys_that_ran_more_than_once(celery_world) -> None:
    # Keyed by the task's idempotency_key kwarg (--celery-key): producer retries included.
    result = score(celery_world.duplicates("events"), celery_world.truth.by_key)
    why = explained(celery_world, "events", result)
    assert result.precision >= 0.99, why
    assert result.recall >= 0.99, why


def test_the_event_stream_names_the_cause_of_each_duplicate(celery_world) -> None:
    result = score(celery_world.duplicates("events"), celery_world.truth.by_key)
    assert result.cause_accuracy >= 0.95, explained(celery_world, "events", result)


def test_the_worker_logs_find_the_tasks_that_ran_more_than_once(celery_world) -> None:
    # Every worker's file in one ingest, the SIGKILLed workers' too; keyed by task id.
    result = score(celery_world.duplicates("logs"), celery_world.truth.by_job_id)
    why = explained(celery_world, "logs", result)
    assert result.precision >= 0.99, why
    assert result.recall >= 0.99, why


def test_the_worker_logs_name_the_cause_of_each_duplicate(celery_world) -> None:
    truth = celery_world.truth
    result = score(celery_world.duplicates("logs"), truth.by_job_id, LOG_EVIDENCE)
    assert result.cause_accuracy >= 0.95, explained(celery_world, "logs", result)


#: Each zero-code source, and the truth of its keys (the logs are keyed by task id).
ZERO_CODE = {"events": "by_key", "logs": "by_job_id"}


def _harmful(truth, source: str) -> tuple[dict[str, str], set[str]]:
    if ZERO_CODE[source] == "by_key":
        return truth.by_key, truth.harmful_keys
    return truth.by_job_id, truth.harmful_job_ids


@pytest.mark.parametrize("source", sorted(ZERO_CODE))
def test_a_source_without_effect_events_calls_every_outcome_unknown(celery_world, source) -> None:
    # Neither events nor logs say whether an effect ran: harmful or absorbed is beyond
    # them, and saying `absorbed` would close an incident where a customer paid twice.
    rows = celery_world.duplicates(source)
    assert rows
    assert {row["outcome"] for row in rows} == {"unknown"}
    assert all(row["harmful"] is None for row in rows)


@pytest.mark.parametrize("source", sorted(ZERO_CODE))
def test_a_side_effect_line_the_app_logs_makes_the_outcome_known(celery_world, source) -> None:
    # The app logs one JSON line per effect keyed by the task id; ingested beside the
    # zero-code source, each line joins the run its task id was delivered to last.
    merged = f"{source}+effects"
    celery_world.ingest(merged, celery_world.effects_log, into=source)
    truth, harmful = _harmful(celery_world.truth, source)
    rows = celery_world.duplicates(merged)
    result = harm(rows, truth, harmful)
    assert result.accuracy >= 0.99, f"{source} on {celery_world.broker}: {result.summary()}"
    assert score(rows, truth).recall >= 0.99  # the effect lines added no duplicate
