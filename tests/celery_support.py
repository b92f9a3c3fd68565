"""Real Celery prefork workers in subprocesses, on the real Redis broker, for the Celery
log tests: each run has its own queue and key prefix, and removes its keys after."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery_worker_support import WorkerProcess, delete_redis_keys

TESTS = Path(__file__).resolve().parent
REDIS_URL = os.environ.get("DUPESCOPE_TEST_REDIS", "redis://127.0.0.1:6379/9")
NODE = "dupescope-test@%h"


def redis_or_skip():  # type: ignore[no-untyped-def]
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS_URL}")
    return client


@dataclass
class CeleryRun:
    """One broker namespace (queue, key prefix, marker folder) and the log its workers
    write; `send` publishes a task of `celery_log_app` to it."""

    log: Path
    env: dict[str, str]
    producer: object

    def send(self, task: str, *args: object) -> str:
        result = self.producer.send_task(  # type: ignore[attr-defined]
            f"celery_log_app.{task}", args=args, queue=self.env["DUPESCOPE_CELERY_QUEUE"]
        )
        return str(result.id)

    @contextmanager
    def worker(self, *, loglevel: str = "INFO") -> Iterator[subprocess.Popen[bytes]]:
        """A prefork worker (2 processes) appending stdout and stderr to `log`, as a
        service manager would keep them; stopped warm on leaving, killed if it hangs."""
        command = [
            sys.executable, "-m", "celery", "-A", "celery_log_app", "worker",
            "--pool=prefork", "-c", "2", f"--loglevel={loglevel}", "-n", NODE,
            "-Q", self.env["DUPESCOPE_CELERY_QUEUE"],
            "--without-mingle", "--without-gossip", "--without-heartbeat",
        ]
        with open(self.log, "ab") as out:
            worker = WorkerProcess(command, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                   cwd=self.log.parent)
        try:
            yield worker.process
        finally:
            worker.stop()
            worker.kill(5)  # the pool processes too, wherever the main process left them

    def wait_for(self, pattern: str, count: int = 1, timeout: float = 30.0) -> None:
        """Until the log holds `count` lines matching `pattern`."""
        expression = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            if len(expression.findall(text)) >= count:
                return
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        raise AssertionError(f"no {count} x {pattern!r} in the worker's log:\n{tail}")


@contextmanager
def celery_run(folder: Path) -> Iterator[CeleryRun]:
    from celery import Celery

    client = redis_or_skip()
    name = f"dupescope-test-{uuid.uuid4().hex[:12]}"
    marks = folder / "marks"
    marks.mkdir(parents=True, exist_ok=True)
    options = {"global_keyprefix": f"{name}:"}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "DUPESCOPE_CELERY_BROKER": REDIS_URL,
        "DUPESCOPE_CELERY_QUEUE": name,
        "DUPESCOPE_CELERY_PREFIX": f"{name}:",
        "DUPESCOPE_CELERY_MARKS": str(marks),
    }
    producer = Celery("producer", broker=REDIS_URL)
    producer.conf.broker_transport_options = options
    try:
        yield CeleryRun(folder / "worker.log", env, producer)
    finally:
        producer.close()
        delete_redis_keys(client, f"{name}:*", name)
        client.close()
