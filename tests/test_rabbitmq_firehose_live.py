"""`collect --rabbitmq-firehose` on a real RabbitMQ, in a traced vhost of its own: the trace
messages wait in the collector's durable queue while it is away, and are acknowledged
once their rows are stored."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from collect_support import running, wait_for_rows

from store.embedded import EmbeddedStore

RABBITMQCTL = shutil.which("rabbitmqctl")


def _ctl(*args: str) -> str:
    assert RABBITMQCTL is not None
    done = subprocess.run([RABBITMQCTL, *args], check=True, capture_output=True, timeout=60)
    return done.stdout.decode()


@pytest.fixture
def traced_vhost() -> Iterator[str]:
    if RABBITMQCTL is None or os.geteuid() != 0:
        pytest.skip("needs rabbitmqctl, as root, for a vhost of its own")
    vhost = f"dupescope-firehose-{uuid.uuid4().hex[:8]}"
    _ctl("add_vhost", vhost)
    try:
        _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        _ctl("trace_on", "-p", vhost)
        yield vhost
    finally:
        _ctl("delete_vhost", vhost)


def _publish(url: str, count: int) -> None:
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.queue_declare("billing")
        for n in range(count):
            body = {"queue_name": "billing", "actor_name": "charge", "args": [f"inv-{n}"],
                    "kwargs": {}, "options": {}, "message_id": f"m-{n}",
                    "message_timestamp": 1796459764107}
            channel.basic_publish("", "billing", orjson.dumps(body))
    finally:
        connection.close()


def test_trace_messages_sent_while_away_are_stored_and_acknowledged(
    traced_vhost: str, tmp_path: Path
) -> None:
    url = f"amqp://guest:guest@127.0.0.1:5672/{quote(traced_vhost, safe='')}"
    store = EmbeddedStore(tmp_path / "store")
    options = {"rabbitmq_firehoses": [url], "http_port": None, "grpc_port": None,
               "compact_every": 0}
    with running(store, **options) as first:
        assert first.firehoses[0].connected.wait(15)
        queue = first.firehoses[0].queue_name
    _publish(url, 3)  # nobody consumes the trace meanwhile: it waits in the queue
    assert f"{queue}\t3" in _ctl("list_queues", "-p", traced_vhost, "name", "messages")
    with running(store, **options) as second:
        wait_for_rows(store, 3)
        assert second.firehoses[0].queue_name == queue
    listed = _ctl("list_queues", "-p", traced_vhost, "name", "messages")
    assert f"{queue}\t0" in listed  # acknowledged, once stored
    events = store.execute("SELECT event, job_id FROM events ORDER BY job_id")
    assert list(events["event"]) == ["enqueue"] * 3


def test_a_celery_workers_retry_and_lost_process_are_told_from_the_firehose(
    traced_vhost: str, tmp_path: Path
) -> None:
    from celery_worker_support import WorkerProcess

    from queries import duplicates

    url = f"amqp://guest:guest@127.0.0.1:5672/{quote(traced_vhost, safe='')}"
    store = EmbeddedStore(tmp_path / "store")
    marks = tmp_path / "marks"
    marks.mkdir()
    tests = Path(__file__).parent
    env = {**os.environ, "DUPESCOPE_CELERY_BROKER": url, "DUPESCOPE_CELERY_QUEUE": "billing",
           "DUPESCOPE_CELERY_MARKS": str(marks), "DUPESCOPE_CELERY_PREFIX": "firehose-",
           "PYTHONPATH": str(tests)}
    log = tmp_path / "worker.log"
    with running(store, rabbitmq_firehoses=[url], http_port=None, grpc_port=None,
                 compact_every=0) as collector, open(log, "wb") as out:
        assert collector.firehoses[0].connected.wait(15)
        worker = WorkerProcess(
            [str(Path(sys.executable).parent / "celery"), "-A", "celery_log_app", "worker",
             "-Q", "billing", "-c", "1", "--loglevel", "INFO", "--without-gossip",
             "--without-mingle", "--without-heartbeat"],
            env=env, cwd=tests, stdout=out, stderr=out,
        )
        try:
            sender = subprocess.run(
                [sys.executable, "-c", "import celery_log_app as a; "
                 "a.flaky.delay(); a.crash.delay()"],
                env=env, cwd=tests, capture_output=True, timeout=60,
            )
            assert sender.returncode == 0, sender.stderr.decode()
            # enqueue x2, flaky: deliver, retry, deliver; crash: deliver, deliver again
            wait_for_rows(store, 7, timeout=45)
        finally:
            worker.stop()
    found = duplicates(store)
    causes = dict(zip(found["job_type"], found["cause"], strict=True))
    assert causes == {"celery_log_app.flaky": "retry_after_failure",
                      "celery_log_app.crash": "worker_crash"}
