"""A Celery pool process SIGKILLed under its task while the worker's main process lives
on (an OOM kill of one child), on real Redis and RabbitMQ with a real prefork worker,
read from the event stream alone (see tests/celery_world).

With `task_acks_late` and `task_reject_on_worker_lost` Celery 5.7 requeues the task and
sends `task-rejected` (requeue), no `task-failed`; the task runs again, and the stream must
call that a worker crash, not a retry after failure. Under the default (no
`task_reject_on_worker_lost`) Celery sends `task-failed` with `WorkerLostError`, and the
task mostly does not run again; on a loaded machine Redis sometimes restores the unacked
copy and it does. Either way the stream must report what the ledger shows."""

from __future__ import annotations

import pytest
from celery_world.harness import POOL_KILL_VISIBILITY_S, CeleryWorld
from support.scoring import score


def _world(tmp_path_factory, broker: str, reject_on_worker_lost: bool) -> CeleryWorld:
    name = f"pool-kill-{broker}-{'reject' if reject_on_worker_lost else 'default'}"
    world = CeleryWorld(broker, tmp_path_factory.mktemp(name), sources=(),
                        reject_on_worker_lost=reject_on_worker_lost,
                        visibility_s=POOL_KILL_VISIBILITY_S)
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
    # Redis sometimes hands the requeued task out twice (the requeue, and the restore of
    # its unacked copy): the ledger shows a third run. The stream dates a run by its
    # `task-received`, which a prefetching worker sends while the run before still goes
    # on, so it reads that third run as a visibility timeout; the crash is then among the
    # causes, not first. Keys the ledger shows ran exactly twice must be called a crash.
    rows = requeued.duplicates("events")
    truth = requeued.truth
    runs = {key: sum(run.key == key for run in truth.runs) for key in truth.by_key}
    twice = {key: cause for key, cause in truth.by_key.items() if runs[key] == 2}
    why = f"{requeued.broker}: runs per key {runs}; rows {rows}; logs in {requeued.folder}"
    found = score(rows, truth.by_key)
    assert found.precision >= 0.99 and found.recall >= 0.99, why
    assert all("worker_crash" in row["causes"] for row in rows), why
    judged = score([row for row in rows if row["key"] in twice], twice)
    assert judged.cause_judged == len(twice) and judged.cause_accuracy >= 0.95, why


def test_without_reject_on_worker_lost_the_stream_reports_what_the_ledger_shows(
    not_requeued,
) -> None:
    truth = not_requeued.truth
    killed = {k for k, cause in truth.planned.items() if cause == "worker_crash"}
    assert not_requeued.killed_pool_processes
    assert {r.key for r in truth.runs} >= killed  # the killed tasks had started
    reported = {row["key"] for row in not_requeued.duplicates("events")}
    assert reported == set(truth.by_key), f"ledger: {truth.by_key}"
