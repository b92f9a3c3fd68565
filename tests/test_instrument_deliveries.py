"""Delivery counts for Celery, where `retries` misses every redelivery."""

from __future__ import annotations

import logging
import uuid
from types import SimpleNamespace

import orjson
import pytest
from billiard.exceptions import WorkerLostError
from celery import Celery
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from dupescope import instrument
from dupescope.instrument.celery import instrument_celery
from dupescope.instrument.deliveries import (
    BackendCounter,
    LocalCounter,
    default_counter,
    delivery_attempt,
)


def request(retries: int = 0, redelivered: bool = False, receive_count: str | None = None):
    properties = {}
    if receive_count is not None:
        attributes = {"ApproximateReceiveCount": receive_count}
        properties = {"delivery_info": {"sqs_message": {"Attributes": attributes}}}
    return SimpleNamespace(
        retries=retries, delivery_info={"redelivered": redelivered}, properties=properties
    )


@pytest.mark.parametrize(
    ("given", "counted", "attempt"),
    [
        (request(), None, 1),
        (request(retries=2), None, 3),
        (request(redelivered=True), None, 2),  # at least once before; how often unknown
        (request(retries=1, receive_count="3"), None, 4),  # SQS restarts per retry message
        (request(redelivered=True), 5, 5),  # the shared counter knows best
        (request(retries=2), 1, 3),  # a counter that lost its key never lowers the attempt
    ],
)
def test_the_attempt_is_the_largest_any_source_knows(given, counted, attempt) -> None:
    assert delivery_attempt(given, counted) == attempt


def test_the_local_counter_counts_and_forgets_the_oldest() -> None:
    counter = LocalCounter(size=2)
    assert [counter.count("a"), counter.count("a"), counter.count("b")] == [1, 2, 1]
    counter.count("c")
    assert counter.seen("a") is None and counter.seen("c") == 1


def test_the_result_backend_counter_is_shared_by_every_process() -> None:
    app = Celery("counting", backend="cache+memory://")
    counter = default_counter(app)
    assert isinstance(counter, BackendCounter)
    job_id = str(uuid.uuid4())
    # Two processes are two counters on one backend.
    other = default_counter(app)
    assert [counter.count(job_id), other.count(job_id), counter.count(job_id)] == [1, 2, 3]
    assert other.seen(job_id) == 3


def test_a_memcached_style_backend_starts_the_count_with_add() -> None:
    class Client:
        def __init__(self) -> None:
            self.values: dict[str, int] = {}

        def add(self, key: str, value: str, ttl: int) -> bool:
            if key in self.values:
                return False
            self.values[key] = int(value)
            return True

    class Backend:
        client = Client()

        def incr(self, key: str) -> int | None:  # memcached: None for a missing key
            if key not in self.client.values:
                return None
            self.client.values[key] += 1
            return self.client.values[key]

    counter = BackendCounter(Backend())
    assert [counter.count("m"), counter.count("m")] == [1, 2]


def test_without_a_counting_backend_the_count_is_per_process() -> None:
    assert isinstance(default_counter(Celery("no-results")), LocalCounter)


def test_a_failing_backend_gives_no_count_and_one_warning(caplog) -> None:
    class Down:
        def incr(self, key: str) -> int:
            raise ConnectionError("backend down")

    counter = BackendCounter(Down())
    with caplog.at_level(logging.WARNING):
        assert counter.count("x") is None and counter.count("x") is None
    assert caplog.text.count("cannot count deliveries") == 1


def test_a_failure_settled_for_a_lost_pool_process_names_who_settled_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "main-process"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Celery("lost", backend="cache+memory://")

    @app.task(name="billing.charge", shared=False)
    def charge() -> None: ...

    sinks = instrument.Sinks(tracer_provider=provider, worker_id="host:100")
    hooks = instrument_celery(app, sinks=sinks, otel=False)
    try:
        lost = WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL) Job: 0.")
        hooks.on_failure(sender=charge, task_id="t-lost", exception=lost)
    finally:
        hooks.uninstrument()
    decoded = decode_traces(encode_spans(exporter.get_finished_spans()), Normaliser(), "t")
    (row,) = decoded.rows
    attrs = orjson.loads(row["attrs"])
    assert (row["event"], row["job_id"], row["job_type"]) == ("fail", "t-lost", "billing.charge")
    assert attrs["settled_by"] == "host:100"
    assert attrs["reason"].startswith("WorkerLostError: Worker exited prematurely")
