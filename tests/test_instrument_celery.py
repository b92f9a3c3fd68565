"""A real Celery worker (in-memory broker and result backend) runs instrumented tasks.

The spans go through the OTLP encoding and the collector's decoder into a store, and the
per-key timeline must show what happened: each run an execution with its delivery count,
its side effects and how it was settled.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator

import orjson
import pandas as pd
import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker
from celery.exceptions import Ignore, Reject
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors.arrow_batch import rows_to_table
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from dupescope import instrument
from dupescope.instrument.celery import instrument_celery
from queries import timeline

_apps = itertools.count()
RESULT_TIMEOUT_S = 10


def make_app() -> Celery:
    # A new app per test: the in-memory broker and cache are per app name and process.
    app = Celery(f"instrumented{next(_apps)}", broker="memory://", backend="cache+memory://")
    app.conf.task_acks_late = True
    # A short polling interval keeps each test well under a second.
    app.conf.broker_transport_options = {"visibility_timeout": 60, "polling_interval": 0.05}

    @app.task(bind=True, name="billing.charge", max_retries=2, shared=False)
    def charge(self, order_id: str) -> str:
        instrument.current_run().side_effect(order_id=order_id)
        if self.request.retries == 0 and order_id.startswith("flaky"):
            # The effect already ran; the retry runs it again: the harmful duplicate.
            raise self.retry(countdown=0, exc=TimeoutError("gateway timeout"))
        return "charged"

    @app.task(name="mail.send", shared=False)
    def send(to: str) -> str:
        instrument.current_run().side_effect(to=to)
        return "sent"

    @app.task(name="report.build", shared=False)
    def build(report: str) -> str:
        raise ValueError(f"no data for {report}")

    @app.task(bind=True, name="mail.bounce", shared=False)
    def bounce(self, to: str) -> None:
        if to.startswith("ignore"):
            raise Ignore()
        raise Reject("mailbox gone", requeue=False)

    return app


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    # One provider for the module: opentelemetry-instrumentation-celery binds its tracer
    # once, at its first instrument().
    found = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "worker"}))
    provider.add_span_processor(SimpleSpanProcessor(found))
    found.provider = provider
    yield found
    provider.shutdown()


@pytest.fixture(scope="module", params=["dupescope-spans", "otel-celery-spans"])
def worker(request, exporter) -> Iterator[Celery]:
    """One worker per way of making spans; each test uses its own keys and message ids."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    exporter.clear()
    app = make_app()
    otel = request.param == "otel-celery-spans"
    app.otel_spans = otel
    sinks = instrument.Sinks(tracer_provider=exporter.provider)
    hooks = instrument_celery(app, sinks=sinks, otel=otel, service_version="9.9")
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield app
    finally:
        hooks.uninstrument()
        if otel:
            CeleryInstrumentor().uninstrument()


def finished_runs(exporter: InMemorySpanExporter, job_id: str) -> list:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.attributes.get("job.job_id") == job_id and s.attributes.get("job.event") == "deliver"
    ]


def settled(exporter: InMemorySpanExporter, job_id: str) -> bool:
    """A settle of `job_id` was exported: a span event, or a step span (when the run's span
    had already ended, as opentelemetry-instrumentation-celery ends it first)."""
    kinds = {"ack", "nack", "fail"}
    for span in exporter.get_finished_spans():
        if span.attributes.get("job.job_id") != job_id:
            continue
        if span.attributes.get("job.event") in kinds or kinds & {e.name for e in span.events}:
            return True
    return False


def wait_for(condition, timeout_s: float = RESULT_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the worker did not get there in time"
        time.sleep(0.02)


def stored(exporter: InMemorySpanExporter, store) -> list[dict]:
    decoded = decode_traces(encode_spans(exporter.get_finished_spans()), Normaliser(), "celery")
    assert not decoded.rejected, decoded.rejected
    store.write(rows_to_table(decoded.rows))
    return decoded.rows


def steps(frame) -> list[tuple]:
    def value(v):
        return None if pd.isna(v) else int(v)

    return [
        (e, value(a), value(x))
        for e, a, x in zip(
            frame["event"], frame["delivery_attempt"], frame["execution"], strict=True
        )
    ]


def test_a_retry_after_the_effect_ran_is_two_executions(worker, exporter, embedded) -> None:
    charge = worker.tasks["billing.charge"]
    result = charge.apply_async(("flaky-1",), headers={"idempotency_key": "order-flaky-1"})
    assert result.get(timeout=RESULT_TIMEOUT_S) == "charged"
    stored(exporter, embedded)
    events = steps(timeline(embedded, "order-flaky-1"))
    worker_side = [s for s in events if s[0] != "enqueue"]
    assert worker_side == [
        ("deliver", 1, 1),
        ("side_effect", 1, 1),
        ("nack", 1, 1),
        ("deliver", 2, 2),
        ("side_effect", 2, 2),
        ("ack", 2, 2),
    ]
    frame = timeline(embedded, "order-flaky-1")
    assert set(frame["job_id"]) == {result.id}
    assert "TimeoutError: gateway timeout" in frame[frame["event"] == "nack"]["attrs"].iloc[0]


def test_a_clean_task_is_one_execution_and_its_enqueue(worker, exporter, embedded) -> None:
    result = worker.tasks["mail.send"].apply_async(("a@example.com",))
    assert result.get(timeout=RESULT_TIMEOUT_S) == "sent"
    stored(exporter, embedded)
    frame = timeline(embedded, result.id)
    assert steps(frame) == [
        ("enqueue", None, None),
        ("deliver", 1, 1),
        ("side_effect", 1, 1),
        ("ack", 1, 1),
    ]
    # With the OpenTelemetry instrumentation, its own spans carry the events.
    names = [orjson.loads(a)["span.name"] for a in frame["attrs"].iloc[:2]]
    if worker.otel_spans:
        assert names == ["apply_async/mail.send", "run/mail.send"]
    else:
        assert names == ["enqueue", "run/mail.send"]


def test_a_redelivered_message_counts_its_deliveries(worker, exporter, embedded) -> None:
    # The same message id delivered twice with the same `retries`: a broker redelivery as
    # the worker sees it. Celery would call both attempt 1.
    # (A fresh id: the in-memory result backend, like Redis, outlives one worker.)
    send, message_id = worker.tasks["mail.send"], f"msg-again-{uuid.uuid4()}"
    for runs in (1, 2):
        send.apply_async(("b@example.com",), task_id=message_id)
        # The result of the first run answers at once: wait for the run itself.
        wait_for(lambda n=runs: len(finished_runs(exporter, message_id)) == n)
    stored(exporter, embedded)
    delivered = [s for s in steps(timeline(embedded, message_id)) if s[0] == "deliver"]
    assert delivered == [("deliver", 1, 1), ("deliver", 2, 2)]


def test_a_failure_is_fail_with_its_reason(worker, exporter, embedded) -> None:
    result = worker.tasks["report.build"].apply_async(("q3",))
    with pytest.raises(ValueError):
        result.get(timeout=RESULT_TIMEOUT_S)
    stored(exporter, embedded)
    frame = timeline(embedded, result.id)
    assert list(frame["event"]) == ["enqueue", "deliver", "fail"]
    assert "ValueError: no data for q3" in frame["attrs"].iloc[-1]


def test_the_worker_says_it_started(worker, exporter, embedded) -> None:
    rows = stored(exporter, embedded)
    starts = [r for r in rows if r["event"] == "worker_start"]
    assert starts and starts[0]["service_version"] == "9.9"


def test_reject_without_requeue_is_fail_and_ignore_is_ack(worker, exporter, embedded) -> None:
    bounce = worker.tasks["mail.bounce"]
    rejected = bounce.apply_async(("gone@example.com",))
    ignored = bounce.apply_async(("ignore@example.com",))
    wait_for(lambda: settled(exporter, rejected.id) and settled(exporter, ignored.id))
    stored(exporter, embedded)
    assert list(timeline(embedded, rejected.id)["event"]) == ["enqueue", "deliver", "fail"]
    assert list(timeline(embedded, ignored.id)["event"]) == ["enqueue", "deliver", "ack"]
