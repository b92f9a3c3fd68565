"""Real brokers and real Celery workers for the event-stream tests.

Redis (127.0.0.1:6379) and RabbitMQ (127.0.0.1:5672, guest/guest) are shared with other
users of the machine: every test gets its own task queue and event exchange (a uuid in
their names), and deletes them afterwards; nothing is flushed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery
from celery_worker_support import WorkerProcess, delete_queues_and_exchanges, says_ready

REDIS_URL = "redis://127.0.0.1:6379/11"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"
CELERY = str(Path(sys.executable).with_name("celery"))

#: The worker's tasks: a module written beside the test, imported by `celery -A tasks`.
TASKS = '''
import os
import time
from pathlib import Path

from celery import Celery

app = Celery("dupescope_events_tests", broker=os.environ["DS_BROKER"])
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue=os.environ["DS_QUEUE"],
    event_exchange=os.environ["DS_EXCHANGE"],
    worker_send_task_events=True,
    task_send_sent_event=True,
    broker_connection_retry_on_startup=True,
    # Redis: unacknowledged messages come back after 2 s, looked for every second.
    broker_transport_options={"visibility_timeout": 2, "polling_interval": 0.1,
                              "unacked_restore_interval": 1, "unacked_restore_throttle": 1},
)
MARKS = Path(os.environ["DS_MARKS"])


@app.task(name="tests.double")
def double(x):
    return 2 * x


@app.task(name="tests.charge")
def charge(order_id, amount=1):
    return order_id


@app.task(name="tests.charge_slowly")
def charge_slowly(order):
    """Runs for a minute the first time (long enough to be killed), at once after."""
    mark = MARKS / order
    if mark.exists():
        return "charged again"
    mark.write_text(str(os.getpid()))
    time.sleep(60)
    return "charged"


@app.task(name="tests.outlive")
def outlive(order, seconds):
    """Runs `seconds` the first time (past the visibility timeout), at once after."""
    mark = MARKS / order
    if mark.exists():
        return "again"
    mark.write_text(str(os.getpid()))
    time.sleep(seconds)
    return "done"


@app.task(name="tests.flaky", bind=True, max_retries=1)
def flaky(self):
    if self.request.retries == 0:
        raise self.retry(countdown=0.1, exc=TimeoutError("gateway timeout"))
    return "ok"
'''


@dataclass
class Broker:
    """One test's corner of a real broker."""

    url: str
    queue: str
    exchange: str

    def app(self) -> Celery:
        """A producer configured as the workers are."""
        app = Celery(f"producer-{self.queue}", broker=self.url, set_as_current=False)
        app.conf.update(task_default_queue=self.queue, event_exchange=self.exchange,
                        task_send_sent_event=True)
        return app

    def delete_queue(self, name: str) -> None:
        delete_queues_and_exchanges(self.url, queues=[name])  # or gone already

    def cleanup(self, *queues: str) -> None:
        # Celery also made an exchange named after the task queue.
        delete_queues_and_exchanges(self.url, queues=[self.queue, *queues],
                                    exchanges=[self.exchange, self.queue])


def new_broker(url: str) -> Broker:
    tag = uuid.uuid4().hex[:10]
    return Broker(url, queue=f"dupescope-test-{tag}", exchange=f"dupescope-test-ev-{tag}")


class Worker(WorkerProcess):
    """`celery -A tasks worker -E` (prefork, one child) in a session of its own, so that
    killing it kills its pool child too."""

    def __init__(self, folder: Path, broker: Broker, hostname: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tasks.py").write_text(TASKS)
        marks = folder / "marks"
        marks.mkdir(exist_ok=True)
        self.hostname = hostname
        self.log = folder / f"{hostname.split('@')[0]}.log"
        env = {**os.environ, "DS_BROKER": broker.url, "DS_QUEUE": broker.queue,
               "DS_EXCHANGE": broker.exchange, "DS_MARKS": str(marks),
               "PYTHONPATH": str(folder)}
        super().__init__(
            [CELERY, "-A", "tasks", "worker", "-E", "-P", "prefork", "-c", "1",
             "-n", hostname, "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=folder, env=env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
        )

    def ready(self) -> bool:
        return says_ready(self.log, self.hostname)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
