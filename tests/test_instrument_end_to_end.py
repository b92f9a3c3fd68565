"""End to end: an instrumented Celery worker exports through the real OTLP/HTTP exporter to
a running `dupescope collect`, and `dupescope duplicates` names what ran twice and why.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker
from click.testing import CliRunner
from collect_support import Subprocess
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from dupescope import instrument
from dupescope.cli import main
from dupescope.instrument.celery import instrument_celery

TIMEOUT_S = 10


class Ledger:
    """The business effect: how many times each order was charged."""

    def __init__(self) -> None:
        self.charges: dict[str, int] = {}

    def charge(self, order_id: str) -> None:
        self.charges[order_id] = self.charges.get(order_id, 0) + 1


def make_app(ledger: Ledger) -> Celery:
    app = Celery(f"e2e-{uuid.uuid4().hex[:8]}", broker="memory://", backend="cache+memory://")
    app.conf.task_acks_late = True
    app.conf.broker_transport_options = {"polling_interval": 0.05}

    @app.task(bind=True, name="billing.charge", max_retries=2, shared=False)
    def charge(self, order_id: str) -> str:
        ledger.charge(order_id)
        instrument.current_run().side_effect(order_id=order_id)
        if self.request.retries == 0 and order_id.startswith("flaky"):
            raise self.retry(countdown=0, exc=TimeoutError("gateway timeout"))
        return "charged"

    return app


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Subprocess]:
    process = Subprocess(tmp_path / "store")
    yield process
    process.stop()


@pytest.fixture
def provider(collector: Subprocess) -> Iterator[TracerProvider]:
    exporter = OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces", timeout=TIMEOUT_S)
    made = TracerProvider(resource=Resource.create({"service.name": "billing-worker"}))
    made.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    yield made
    made.shutdown()


def duplicates(store: Path) -> dict[str, dict]:
    result = CliRunner().invoke(main, ["duplicates", "--store", str(store), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {row["key"]: row for row in orjson.loads(result.stdout)}


def test_duplicates_from_a_real_worker_through_the_collector(
    tmp_path: Path, provider: TracerProvider
) -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    ledger = Ledger()
    app = make_app(ledger)
    charge = app.tasks["billing.charge"]
    hooks = instrument_celery(app, sinks=instrument.Sinks(tracer_provider=provider))
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            # A retry after the charge went through: the customer is charged twice.
            flaky = charge.apply_async(("flaky-1",), headers={"idempotency_key": "order-flaky"})
            # A producer that timed out and sent the order again, as a new message.
            twice = [
                charge.apply_async(("steady-1",), headers={"idempotency_key": "order-twice"})
                for _ in range(2)
            ]
            # A broker redelivering a message it had already delivered.
            message_id = f"redelivered-{uuid.uuid4()}"
            charge.apply_async(("steady-2",), task_id=message_id)
            clean = charge.apply_async(("steady-3",), headers={"idempotency_key": "order-clean"})
            for result in [flaky, *twice, clean]:
                assert result.get(timeout=TIMEOUT_S) == "charged"
            deadline = time.monotonic() + TIMEOUT_S
            charge.apply_async(("steady-2",), task_id=message_id)
            while ledger.charges.get("steady-2", 0) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
    finally:
        hooks.uninstrument()
        CeleryInstrumentor().uninstrument()
    assert provider.force_flush(TIMEOUT_S * 1000)

    found = duplicates(tmp_path / "store")
    assert ledger.charges == {"flaky-1": 2, "steady-1": 2, "steady-2": 2, "steady-3": 1}
    assert "order-clean" not in found
    expected = {
        "order-flaky": ("retry_after_failure", 1),
        "order-twice": ("producer_retry", 2),
        message_id: ("broker_redelivery", 1),
    }
    for key, (cause, job_ids) in expected.items():
        row = found[key]
        assert (row["cause"], row["executions"], row["side_effects"], row["harmful"]) == (
            cause,
            2,
            2,
            True,
        ), row
        assert row["job_type"] == "billing.charge"
        assert len(row["job_ids"]) == job_ids
    assert set(found) == set(expected)
