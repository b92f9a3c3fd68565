"""A Celery app whose tasks end in every way a worker's log can tell: the worker for the
Celery log tests (`celery -A celery_log_app worker`), configured from the environment.

Each misbehaving task misbehaves on its first run only (a marker file per task id), so its
redelivery completes and the log shows how the duplicate came about.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from celery import Celery, Task

QUEUE = os.environ["DUPESCOPE_CELERY_QUEUE"]
MARKS = Path(os.environ["DUPESCOPE_CELERY_MARKS"])

app = Celery("celery_log_app", broker=os.environ["DUPESCOPE_CELERY_BROKER"])
app.conf.update(
    task_default_queue=QUEUE,
    task_acks_late=True,
    task_reject_on_worker_lost=True,  # a lost pool process's message goes back to the queue
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "visibility_timeout": float(os.environ.get("DUPESCOPE_CELERY_VISIBILITY", "2")),
        # Look for overdue messages twice a second (Celery's default: every 100 s).
        "unacked_restore_interval": 0.5,
        "unacked_restore_throttle": 1,
        "global_keyprefix": os.environ["DUPESCOPE_CELERY_PREFIX"],  # this run's keys only
    },
)

if os.environ.get("DUPESCOPE_CELERY_LOG_FORMAT"):
    app.conf.worker_log_format = os.environ["DUPESCOPE_CELERY_LOG_FORMAT"]


def first_run(task: Task) -> bool:
    """True the first time this task id runs (on any worker)."""
    mark = MARKS / f"{task.request.id}.ran"
    try:
        mark.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task(bind=True, max_retries=1)
def flaky(self: Task) -> str:
    if self.request.retries == 0:
        raise self.retry(countdown=0.5, exc=ConnectionError("upstream down"))
    return "done"


@app.task
def broken() -> None:
    raise ValueError("bad input")


@app.task(bind=True)
def crash(self: Task) -> str:
    """Its pool process dies under it (the OOM killer's way): Celery logs WorkerLostError."""
    if first_run(self):
        os.kill(os.getpid(), signal.SIGKILL)
    return "survived"


@app.task(bind=True)
def slow(self: Task, seconds: float) -> str:
    """Outlives the visibility timeout on its first run: the broker hands it out again."""
    if first_run(self):
        time.sleep(seconds)
    return "slept"


class KillsWorkerAfterSuccess(Task):
    def after_return(self, status, retval, task_id, args, kwargs, einfo):  # type: ignore[no-untyped-def]
        # After "succeeded" is logged, before the main process acknowledges the message.
        if (MARKS / f"{task_id}.ran").exists() and not (MARKS / f"{task_id}.killed").exists():
            (MARKS / f"{task_id}.killed").touch()
            os.kill(os.getppid(), signal.SIGKILL)


@app.task(bind=True, base=KillsWorkerAfterSuccess)
def unacked(self: Task) -> str:
    """Succeeds, then the whole worker dies before the ack: the message is handed out again."""
    first_run(self)
    return "charged"
