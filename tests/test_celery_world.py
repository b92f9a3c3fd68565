"""Celery as its users run it: real prefork workers on real Redis and RabbitMQ, a worker
SIGKILLed before its ack, a task outliving the visibility timeout, a producer resending
after a timeout, and many normal tasks. Each source alone must name the keys that truly
ran more than once, and why (see tests/celery_world)."""

from __future__ import annotations

from celery_world.scoring import score

#: What spans without an idempotency key can tell: their key is the job_id, so a producer
#: retry (two job_ids) is out of their reach.
JOB_ID_EVIDENCE = {"visibility_timeout", "worker_crash"}


def test_the_scenario_injected_every_fault(celery_world) -> None:
    truth = celery_world.truth
    assert truth.by_key == truth.planned
    assert truth.killed_nodes
    assert len(truth.keys) > 3 * len(truth.by_key)  # mostly normal tasks, run once


def test_dupescope_instrumentation_names_the_duplicates_and_their_causes(celery_world) -> None:
    result = score(celery_world.duplicates("dupescope"), celery_world.truth.by_key)
    assert result.precision >= 0.99, result.summary()
    assert result.recall >= 0.99, result.summary()
    assert result.cause_accuracy >= 0.95, result.summary()


def test_celery_instrumentor_spans_name_the_duplicates_and_their_causes(celery_world) -> None:
    # The crashed worker's spans are lost, as in production: its batch was never exported.
    truth = celery_world.truth
    result = score(celery_world.duplicates("otel"), truth.by_job_id, JOB_ID_EVIDENCE)
    assert result.precision >= 0.99, result.summary()
    assert result.recall >= 0.99, result.summary()
    assert result.cause_accuracy >= 0.95, result.summary()
