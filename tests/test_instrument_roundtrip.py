"""What the instrumentation emits reads back, through the real decoders, as what it was told.

Every event kind goes out through the API once; the spans travel the OTLP encoding the
SDK's exporters use and the log lines the JSON-lines decoder, and both must give the same
canonical rows.
"""

from __future__ import annotations

import io
import logging

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors.jsonlines import decode_lines
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from dupescope import instrument
from store.schema import EVENT_KINDS, INT_FIELDS, STRING_FIELDS

JOB = {
    "job_id": "msg-1",
    "job_type": "billing.invoice",
    "idempotency_key": "invoice-42",
    "delivery_attempt": 2,
    "queue": "billing",
    "visibility_timeout_ms": 30_000,
    "resource_key": "account-7",
}
#: The contract's fields an emitter sets (trace_id and span_id come from the span).
CANONICAL = ("event", *(f for f in STRING_FIELDS + INT_FIELDS if f not in ("trace_id", "span_id")))


class Boom(RuntimeError):
    pass


@pytest.fixture
def sinks():
    exporter = InMemorySpanExporter()
    # A bare resource: the SDK's default adds service.instance.id, which the collector
    # reads as worker_id, and producer events would then carry one the API was not told.
    provider = TracerProvider(resource=Resource({"service.name": "roundtrip"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stream = io.StringIO()
    logger = logging.getLogger("test.instrument.roundtrip")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    chosen = instrument.Sinks(tracer_provider=provider, logger=logger, worker_id="w1")
    yield chosen, exporter, stream
    logger.removeHandler(handler)
    provider.shutdown()


def emit_everything(sinks: instrument.Sinks) -> None:
    """Each event kind once (and each way of settling an execution)."""
    instrument.worker_started("v1.2.3", sinks=sinks)
    instrument.outbox_write("msg-1", "billing.invoice", idempotency_key="invoice-42", sinks=sinks)
    instrument.enqueued(
        "msg-1", "billing.invoice", idempotency_key="invoice-42", queue="billing", sinks=sinks
    )
    instrument.enqueue_deduped("billing.invoice", "invoice-42", queue="billing", sinks=sinks)
    with instrument.job_execution(**JOB, sinks=sinks) as run:
        run.lock_acquired("lock:invoice-42", owner="tok-a", ttl_ms=10_000)
        run.lock_renewed(10_000)
        run.lock_contended("lock:account-7", wait_ms=250, owner="tok-a")
        run.idempotency_hit(record="invoices")
        run.side_effect(effect="invoice.created", amount=12.5)
        run.occ_conflict(table="invoices")
        run.commit()
        run.lock_expired()
        run.lock_released(released=False)
    with instrument.job_execution(**{**JOB, "delivery_attempt": 3}, sinks=sinks) as run:
        run.nack("rate limited", settled_by="broker")
    with pytest.raises(Boom):
        with instrument.job_execution(**{**JOB, "delivery_attempt": 4}, sinks=sinks):
            raise Boom("card declined")
    instrument.worker_stopped(sinks=sinks)


def canonical(row: dict) -> dict:
    picked = {name: row.get(name) for name in CANONICAL if row.get(name) is not None}
    attrs = orjson.loads(row["attrs"]) if row.get("attrs") else {}
    for name in ("reason", "settled_by", "released", "wait_ms", "effect", "amount"):
        if name in attrs:
            picked[name] = attrs[name]
    return picked


def expected() -> list[dict]:
    job = {**JOB, "worker_id": "w1"}
    lock = {"lock_key": "lock:invoice-42", "lock_owner": "tok-a"}
    return [
        {"event": "worker_start", "worker_id": "w1", "service_version": "v1.2.3"},
        {
            "event": "outbox_write",
            "job_id": "msg-1",
            "job_type": "billing.invoice",
            "idempotency_key": "invoice-42",
        },
        {
            "event": "enqueue",
            "job_id": "msg-1",
            "job_type": "billing.invoice",
            "idempotency_key": "invoice-42",
            "queue": "billing",
        },
        {
            "event": "enqueue_deduped",
            "job_type": "billing.invoice",
            "idempotency_key": "invoice-42",
            "queue": "billing",
        },
        {"event": "deliver", **job},
        {"event": "lock_acquire", **job, **lock, "lock_ttl_ms": 10_000},
        {"event": "lock_renew", **job, **lock, "lock_ttl_ms": 10_000},
        {
            "event": "lock_contended",
            **job,
            "lock_key": "lock:account-7",
            "lock_owner": "tok-a",
            "wait_ms": 250,
        },
        {"event": "idempotency_hit", **job},
        {"event": "side_effect", **job, "effect": "invoice.created", "amount": 12.5},
        {"event": "occ_conflict", **job},
        {"event": "commit", **job},
        {"event": "lock_expired", **job, **lock},
        {"event": "lock_release", **job, **lock, "released": False},
        {"event": "ack", **job},
        {"event": "deliver", **job, "delivery_attempt": 3},
        {
            "event": "nack",
            **job,
            "delivery_attempt": 3,
            "reason": "rate limited",
            "settled_by": "broker",
        },
        {"event": "deliver", **job, "delivery_attempt": 4},
        {"event": "fail", **job, "delivery_attempt": 4, "reason": "Boom: card declined"},
        {"event": "worker_stop", "worker_id": "w1"},
    ]


def span_rows(exporter: InMemorySpanExporter) -> list[dict]:
    decoded = decode_traces(encode_spans(exporter.get_finished_spans()), Normaliser(), "spans")
    assert not decoded.rejected, decoded.rejected
    return sorted(decoded.rows, key=lambda r: r["ts"])


def log_rows(stream: io.StringIO) -> list[dict]:
    lines = stream.getvalue().splitlines()
    decoded = decode_lines(
        [(n, line.encode()) for n, line in enumerate(lines, 1)], Normaliser(), "logs"
    )
    assert not decoded.rejected, decoded.rejected
    return decoded.rows


def test_every_event_kind_is_covered() -> None:
    assert {e["event"] for e in expected()} == set(EVENT_KINDS)


def test_spans_read_back_as_what_the_api_was_told(sinks) -> None:
    chosen, exporter, _ = sinks
    emit_everything(chosen)
    assert [canonical(r) for r in span_rows(exporter)] == expected()


def test_log_lines_read_back_as_what_the_api_was_told(sinks) -> None:
    chosen, _, stream = sinks
    emit_everything(chosen)
    assert [canonical(r) for r in log_rows(stream)] == expected()


def test_spans_and_log_lines_agree_on_time_and_trace(sinks) -> None:
    chosen, exporter, stream = sinks
    emit_everything(chosen)
    from_spans, from_logs = span_rows(exporter), log_rows(stream)
    assert [(r["ts"], r["event"]) for r in from_spans] == [(r["ts"], r["event"]) for r in from_logs]
    assert [r["trace_id"] for r in from_spans] == [r["trace_id"] for r in from_logs]


def test_one_execution_span_is_one_execution(sinks) -> None:
    chosen, exporter, _ = sinks
    emit_everything(chosen)
    worker_rows = [r for r in span_rows(exporter) if r["execution_id"]]
    by_execution: dict[str, list[str]] = {}
    for row in worker_rows:
        by_execution.setdefault(row["execution_id"], []).append(row["event"])
    assert [events[0] for events in by_execution.values()] == ["deliver"] * 3
    assert [events[-1] for events in by_execution.values()] == ["ack", "nack", "fail"]
