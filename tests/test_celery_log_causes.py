"""The duplicates a Celery worker's log shows, and their causes, as the queries name them
(on the embedded store and on chDB alike). Excerpts of a real Celery 5.7 worker's log."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.celery_log_lines import ADD, BROKEN, CRASH, FLAKY, SLOW, UNACKED

from collectors.files import ingest_files
from queries import duplicates
from store.base import Store

# The worker was SIGKILLed while this task ran (no WorkerLostError: the main process died
# too); once it was back, the broker handed the message out again.
RUNNING = b"""\
[2026-12-01 20:26:46,218: INFO/MainProcess] Task celery_log_app.slow[03690bf1-4b25-4134-9bfb-cf9297824c0d] received
[2026-12-01 20:26:50,324: INFO/MainProcess] dupescope-test@vm ready.
[2026-12-01 20:26:50,343: INFO/MainProcess] Task celery_log_app.slow[03690bf1-4b25-4134-9bfb-cf9297824c0d] received
[2026-12-01 20:26:50,358: INFO/ForkPoolWorker-2] Task celery_log_app.slow[03690bf1-4b25-4134-9bfb-cf9297824c0d] succeeded in 0.0011390859999664826s: 'slept'
"""  # noqa: E501
# With a 2 s visibility timeout the broker handed the crashed task out again before the
# main process noticed its pool process had died (billiard takes seconds to).
CRASH_NOTICED_LATE = b"""\
[2026-12-01 20:26:39,719: INFO/MainProcess] Task celery_log_app.crash[d6baadfa-38fa-4d82-ac1d-e0937d28c5be] received
[2026-12-01 20:26:42,066: INFO/MainProcess] Task celery_log_app.crash[d6baadfa-38fa-4d82-ac1d-e0937d28c5be] received
[2026-12-01 20:26:42,070: INFO/ForkPoolWorker-1] Task celery_log_app.crash[d6baadfa-38fa-4d82-ac1d-e0937d28c5be] succeeded in 0.000562344999934794s: 'survived'
[2026-12-01 20:26:42,154: INFO/MainProcess] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] received
[2026-12-01 20:26:44,145: ERROR/MainProcess] Process 'ForkPoolWorker-2' pid:20684 exited with 'signal 9 (SIGKILL)'
[2026-12-01 20:26:44,164: ERROR/MainProcess] Task handler raised error: WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL) Job: 3.')
[2026-12-01 20:26:46,167: INFO/ForkPoolWorker-1] Task celery_log_app.slow[e27357db-7b20-4c35-a15d-83cc27c7092e] succeeded in 4.003429528999959s: 'slept'
"""  # noqa: E501


def _causes(store: Store, tmp_path: Path, log: bytes) -> dict[str, str]:
    path = tmp_path / "worker.log"
    path.write_bytes(log)
    report = ingest_files([str(path)], store)
    assert not report.rejected
    found = duplicates(store)
    return dict(zip(found["key"], found["cause"], strict=True))


#: Each excerpt's one task received twice, and the cause the queries must name.
RECEIVED_TWICE = {
    "after_a_retry_is_a_retry_after_failure": (
        FLAKY, "02c60c39-035e-4872-844c-979a12590d03", "retry_after_failure"),
    "after_a_lost_pool_process_is_a_worker_crash": (
        CRASH, "8dc57862-bcda-4bc8-be09-1953ad01680a", "worker_crash"),
    "after_a_crash_noticed_after_the_redelivery_is_still_a_worker_crash": (
        CRASH_NOTICED_LATE, "d6baadfa-38fa-4d82-ac1d-e0937d28c5be", "worker_crash"),
    "while_still_running_is_a_visibility_timeout": (
        SLOW, "e27357db-7b20-4c35-a15d-83cc27c7092e", "visibility_timeout"),
    "after_it_succeeded_is_a_broker_redelivery": (
        UNACKED, "9a8a596f-6c12-4e6d-8500-d83485e202a7", "broker_redelivery"),
    "after_the_worker_died_silently_is_a_worker_crash": (
        RUNNING, "03690bf1-4b25-4134-9bfb-cf9297824c0d", "worker_crash"),
}


@pytest.mark.parametrize(("log", "task_id", "cause"), RECEIVED_TWICE.values(),
                         ids=RECEIVED_TWICE.keys())
def test_a_task_received_again(store, tmp_path, log: bytes, task_id: str, cause: str) -> None:
    assert _causes(store, tmp_path, log) == {task_id: cause}


def test_tasks_that_ran_once_are_no_duplicates(store, tmp_path) -> None:
    assert _causes(store, tmp_path, ADD + BROKEN) == {}
