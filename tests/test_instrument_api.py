"""The API's behaviour beyond the round trip: settling, enriching, the decorator, failures."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dupescope import instrument
from dupescope.instrument.fields import rfc3339


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "api"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield instrument.Sinks(tracer_provider=provider, worker_id="w1"), exporter, provider
    provider.shutdown()


def events_of(span) -> list[str]:
    return [e.name for e in span.events]


def test_an_explicit_settle_is_not_repeated_on_exit(spans) -> None:
    sinks, exporter, _ = spans
    with instrument.job_execution("j", "t", delivery_attempt=1, sinks=sinks) as run:
        run.nack("later")
    (span,) = exporter.get_finished_spans()
    assert events_of(span) == ["nack"]
    assert span.attributes["job.event"] == "deliver"
    assert span.kind == trace.SpanKind.CONSUMER


def test_on_exception_may_choose_nack_and_the_exception_propagates(spans) -> None:
    sinks, exporter, _ = spans

    def retryable(exc: BaseException):
        return "nack" if isinstance(exc, TimeoutError) else "fail"

    with pytest.raises(TimeoutError):
        with instrument.job_execution("j", "t", sinks=sinks, on_exception=retryable):
            raise TimeoutError("upstream")
    (span,) = exporter.get_finished_spans()
    assert events_of(span)[-1] == "nack"
    assert span.events[-1].attributes["reason"] == "TimeoutError: upstream"
    assert span.status.status_code == trace.StatusCode.ERROR


def test_an_existing_span_is_enriched_not_duplicated(spans) -> None:
    sinks, exporter, provider = spans
    with provider.get_tracer("messaging").start_as_current_span("run/mail.send") as outer:
        with instrument.job_execution(
            "j", "mail.send", delivery_attempt=1, span=outer, sinks=sinks
        ) as run:
            run.side_effect()
    (span,) = exporter.get_finished_spans()
    assert span.name == "run/mail.send"
    assert span.attributes["job.job_id"] == "j"
    assert events_of(span) == ["side_effect", "ack"]


def test_the_decorator_and_current_run(spans) -> None:
    sinks, exporter, _ = spans

    def charge(order_id: str) -> None:
        instrument.current_run().side_effect(order_id=order_id)

    @instrument.job(
        "billing.charge",
        fields=lambda order_id: {"job_id": f"m-{order_id}", "idempotency_key": order_id},
        sinks=sinks,
    )
    def handle(order_id: str) -> str:
        charge(order_id)
        return "done"

    assert handle("o-1") == "done"
    assert instrument.current_run() is None
    (span,) = exporter.get_finished_spans()
    assert span.attributes["job.job_type"] == "billing.charge"
    assert span.attributes["job.idempotency_key"] == "o-1"
    assert events_of(span) == ["side_effect", "ack"]


def test_a_broken_log_handler_never_breaks_the_job(spans, caplog) -> None:
    sinks, exporter, provider = spans

    class Broken(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise OSError("disk full")

        def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802
            raise OSError("disk full")

    logger = logging.getLogger("test.instrument.broken")
    logger.propagate = False
    logger.addHandler(Broken())
    logger.setLevel(logging.INFO)
    sinks = instrument.Sinks(tracer_provider=provider, logger=logger, worker_id="w1")
    with instrument.job_execution("j", "t", sinks=sinks) as run:
        run.side_effect()
    assert events_of(exporter.get_finished_spans()[0]) == ["side_effect", "ack"]
    assert "could not log" in caplog.text


def test_log_timestamps_keep_every_microsecond() -> None:
    assert rfc3339(1_764_504_000_123_456_789) == "2025-11-30T12:00:00.123456Z"


def test_the_formatter_writes_other_records_as_json_too() -> None:
    record = logging.LogRecord("app", logging.WARNING, __file__, 1, "hello %s", ("you",), None)
    line = instrument.JsonLineFormatter().format(record)
    assert '"msg":"hello you"' in line and '"level":"WARNING"' in line


def test_a_step_after_the_span_ended_is_a_child_step_of_the_same_execution(spans) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from collectors.normalise import Normaliser
    from collectors.otlp import decode_traces

    sinks, exporter, provider = spans
    outer = provider.get_tracer("messaging").start_span("run/mail.send")
    execution = instrument.job_execution(
        "j", "mail.send", delivery_attempt=1, span=outer, sinks=sinks, ack_on_success=False
    )
    run = execution.start()
    outer.end()  # the messaging instrumentation closed its span first
    run.fail("Reject: mailbox gone")
    decoded = decode_traces(encode_spans(exporter.get_finished_spans()), Normaliser(), "t")
    rows = sorted(decoded.rows, key=lambda r: r["ts"])
    assert [(r["event"], r["job_id"], r["delivery_attempt"]) for r in rows] == [
        ("deliver", "j", 1),
        ("fail", "j", 1),
    ]
    assert rows[0]["execution_id"] == rows[1]["execution_id"]
