"""A Celery pool process SIGKILLed under its task while the worker's main process lives
on (an OOM kill of one child), on real Redis and RabbitMQ with a real prefork worker,
read from the event stream alone (see tests/celery_world).

With `task_acks_late` and `task_reject_on_worker_lost` Celery 5.7 requeues the task and
sends `task-rejected` (requeue), no `task-failed`; the task runs again, and the stream must
call that a worker crash, not a retry after failure. Under the default (no
`task_reject_on_worker_lost`) Celery sends `task-failed` with `WorkerLostError` and the
task does not run again."""

from __future__ import annotations

import pytest
from celery_world.harness import CeleryWorld
from support.scoring import score


def _world(tmp_path_factory, broker: str, reject_on_worker_lost: bool) -> CeleryWorld:
    name = f"pool-kill-{broker}-{'reject' if reject_on_worker_lost else 'default'}"
    world = CeleryWorld(broker, tmp_path_factory.mktemp(name), sources=(),
                        reject_on_worker_lost=reject_on_worker_lost)
    world.add_collector(
        "events", "--celery-broker", world.broker_url, "--celery-exchange",
        world.event_exchange, "--celery-key", "idempotency_key",
    )
    world.run_pool_kills()
    return world


@pytest.fixture(scope="module", params=["redis", "rabbitmq"])
def requeued(request, tmp_path_factory) -> CeleryWorld:
    return _world(tmp_path_factory, request.param, reject_on_worker_lost=True)


@pytest.fixture(scope="module")
def not_requeued(tmp_path_factory) -> CeleryWorld:
    return _world(tmp_path_factory, "redis", reject_on_worker_lost=False)


def test_the_killed_pool_processes_tasks_ran_again(requeued) -> None:
    truth = requeued.truth
    killed = {k for k, cause in truth.planned.items() if cause == "worker_crash"}
    assert requeued.killed_pool_processes
    assert killed and set(truth.by_key) == killed  # the normal tasks ran once
    assert not any(w.killed for w in requeued.worker_logs)  # the worker itself lived on


def test_the_event_stream_calls_a_killed_pool_process_a_worker_crash(requeued) -> None:
    rows = requeued.duplicates("events")
    result = score(rows, requeued.truth.by_key)
    why = f"{requeued.broker}: {result.summary()}; logs in {requeued.folder}"
    assert result.precision >= 0.99 and result.recall >= 0.99, why
    assert result.cause_accuracy >= 0.95, why
    assert {row["cause"] for row in rows} == {"worker_crash"}, why


def test_without_reject_on_worker_lost_the_task_is_not_run_again(not_requeued) -> None:
    truth = not_requeued.truth
    killed = {k for k, cause in truth.planned.items() if cause == "worker_crash"}
    assert not_requeued.killed_pool_processes
    assert truth.by_key == {}  # every task ran once, the killed ones too
    assert {r.key for r in truth.runs} >= killed
    assert not_requeued.duplicates("events") == []
