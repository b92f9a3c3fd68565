"""End to end with no dupescope code in the tasks: a Celery 5 app on the real Redis broker,
opentelemetry-instrumentation-celery in the producer (this process) and in a worker
process, both exporting through the real OTLP/HTTP exporter to a real `dupescope collect`.

Only what a user adds to keep the idempotency key on the publish span (a signal receiver
of three lines, as the README shows) is not stock OpenTelemetry.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from celery.signals import before_task_publish
from celery_redis_support import TASK, Worker, clean, ledger, make_app
from collect_support import Subprocess
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from queries import duplicates
from store.embedded import EmbeddedStore

REDIS_URL = "redis://127.0.0.1:6379/0"
TIMEOUT_S = 30
CLEAN_TASKS = 20
VISIBILITY_TIMEOUT_S = 2


@pytest.fixture
def prefix() -> Iterator[str]:
    """This test's Redis key prefix; every key under it is deleted afterwards."""
    name = f"dupescope-test-{uuid.uuid4().hex[:12]}:"
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.ConnectionError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    yield name
    clean(REDIS_URL, name)


def key_on_the_publish_span(headers: dict | None = None, **_: object) -> None:
    """The user's one addition: CeleryInstrumentor records no idempotency key."""
    key = (headers or {}).get("idempotency_key")
    if key:
        trace.get_current_span().set_attribute("job.idempotency_key", key)


@pytest.fixture
def producer(collector: Subprocess) -> Iterator[TracerProvider]:
    """CeleryInstrumentor in this process, exporting to the collector."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    provider = TracerProvider(resource=Resource.create(
        {"service.name": "shop", "host.name": "web1", "process.pid": os.getpid()}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces"), schedule_delay_millis=200))
    instrumentor = CeleryInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:  # by an earlier test, elsewhere
        instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider)
    # After the instrumentor's own receiver, so that its publish span is the current one.
    before_task_publish.connect(key_on_the_publish_span, weak=False)
    yield provider
    before_task_publish.disconnect(key_on_the_publish_span)
    instrumentor.uninstrument()
    provider.shutdown()


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Subprocess]:
    process = Subprocess(tmp_path / "store")
    yield process
    process.stop()


def wait_for_runs(prefix: str, total: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while sum(ledger(REDIS_URL, prefix).values()) < total:
        assert time.monotonic() < deadline, ledger(REDIS_URL, prefix)
        time.sleep(0.05)


def send(app: Celery, order: str) -> str:
    return app.tasks[TASK].apply_async((order,), headers={"idempotency_key": order}).id


def test_clean_runs_are_no_duplicates_and_a_resend_is_a_producer_retry(
    tmp_path: Path, prefix: str, collector: Subprocess, producer: TracerProvider
) -> None:
    app = make_app(REDIS_URL, prefix)
    worker = Worker(REDIS_URL, prefix, f"{collector.url}/v1/traces", "billing@w1")
    try:
        task_ids = [send(app, f"order-{i}") for i in range(CLEAN_TASKS)]
        # A producer that timed out and sent the order again: a new task id, the same key.
        twice = [send(app, "order-twice") for _ in range(2)]
        wait_for_runs(prefix, CLEAN_TASKS + 2)
    finally:
        worker.stop()
    assert producer.force_flush(TIMEOUT_S * 1000)
    collector.stop()

    store = EmbeddedStore(tmp_path / "store")
    try:
        found = duplicates(store)
        events = store.execute("SELECT event, job_id, worker_id, delivery_attempt FROM events")
    finally:
        store.close()
    assert ledger(REDIS_URL, prefix) == {**{f"order-{i}": 1 for i in range(CLEAN_TASKS)},
                                         "order-twice": 2}
    # Precision: the only duplicate is the key that really ran twice, and why.
    assert list(found["key"]) == ["order-twice"]
    row = found.iloc[0]
    assert (row["cause"], row["executions"], sorted(row["job_ids"])) == (
        "producer_retry", 2, sorted(twice))
    by_event = events.groupby("event")
    assert set(by_event.groups) == {"enqueue", "deliver", "ack"}
    delivered = by_event.get_group("deliver")
    assert sorted(delivered["job_id"]) == sorted(task_ids + twice)
    # The worker is the process that ran the tasks (not celery.hostname, the sender's).
    assert set(delivered["worker_id"]) == {f"{socket.gethostname()}:{worker.process.pid}"}
    assert set(delivered["delivery_attempt"]) == {1}
    # The producer's publish spans are enqueues, and the producer is no worker.
    enqueued = by_event.get_group("enqueue")
    assert sorted(enqueued["job_id"]) == sorted(task_ids + twice)
    assert enqueued["worker_id"].isna().all()


def wait_for(prefix: str, order: str, runs: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while ledger(REDIS_URL, prefix).get(order, 0) < runs:
        assert time.monotonic() < deadline, ledger(REDIS_URL, prefix)
        time.sleep(0.05)


def stored(tmp_path: Path, collector: Subprocess, producer: TracerProvider):
    """The duplicates and the deliveries, once every span is in."""
    assert producer.force_flush(TIMEOUT_S * 1000)
    collector.stop()
    store = EmbeddedStore(tmp_path / "store")
    try:
        delivered = store.execute(
            "SELECT job_id, delivery_attempt FROM events WHERE event = 'deliver' ORDER BY ts")
        return duplicates(store), delivered
    finally:
        store.close()


def run_on_two_workers(prefix: str, collector: Subprocess, key: str, kill_the_first: bool) -> str:
    """Send a task that outlives the visibility timeout to a first worker (killed once it
    runs, or left running) and wait for a second worker to run it again: its task id."""
    app = make_app(REDIS_URL, prefix, VISIBILITY_TIMEOUT_S)
    traces = f"{collector.url}/v1/traces"
    first = Worker(REDIS_URL, prefix, traces, "billing@a", VISIBILITY_TIMEOUT_S)
    second = None
    try:
        task_id = send(app, key)
        wait_for(prefix, key, 1)
        if kill_the_first:
            first.kill()
        second = Worker(REDIS_URL, prefix, traces, "billing@b", VISIBILITY_TIMEOUT_S)
        wait_for(prefix, key, 2)
    finally:
        if kill_the_first:
            first.kill()
        else:
            first.stop()
        if second is not None:
            second.stop()
    return task_id


def test_a_worker_killed_mid_task_is_a_worker_crash_from_the_redelivery_alone(
    tmp_path: Path, prefix: str, collector: Subprocess, producer: TracerProvider
) -> None:
    # SIGKILL after the side effect, before the ack: the killed worker's spans are lost,
    # as in production. Redis restores the message, flagged redelivered, to another worker.
    task_id = run_on_two_workers(prefix, collector, "hang-1", kill_the_first=True)
    found, delivered = stored(tmp_path, collector, producer)
    assert delivered.values.tolist() == [[task_id, 2]]
    row = found.iloc[0]
    assert (len(found), row["key"], row["cause"], row["executions"]) == (
        1, "hang-1", "worker_crash", 2)


def test_a_task_that_outlives_the_visibility_timeout_is_a_visibility_timeout(
    tmp_path: Path, prefix: str, collector: Subprocess, producer: TracerProvider
) -> None:
    # Both runs' spans arrive: the first was still running when the second began.
    task_id = run_on_two_workers(prefix, collector, "slow-1", kill_the_first=False)
    found, delivered = stored(tmp_path, collector, producer)
    assert delivered.values.tolist() == [[task_id, 1], [task_id, 2]]
    row = found.iloc[0]
    assert (len(found), row["key"], row["cause"], row["executions"]) == (
        1, "slow-1", "visibility_timeout", 2)
