"""What CeleryInstrumentor writes, built with the real SDK: a producer's publish span and a
worker's run span, as opentelemetry-instrumentation-celery names their attributes."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

T0 = 1_760_000_000_000_000_000
TASK = "billing.charge"
WORKER = Resource.create({"service.name": "billing-worker", "host.name": "w1",
                          "process.pid": 4242})
PRODUCER = Resource.create({"service.name": "shop", "host.name": "web1", "process.pid": 11})
DELIVERY_INFO = "{'exchange': '', 'routing_key': 'celery', 'priority': 0, 'redelivered': %s}"


class Process:
    """One instrumented process: a real SDK tracer provider with an in-memory exporter."""

    def __init__(self, resource: Resource) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("opentelemetry.instrumentation.celery")

    def span(self, name: str, kind: SpanKind, attrs: dict[str, Any], at_s: float = 0,
             events: tuple[tuple[str, float], ...] = ()) -> None:
        start = T0 + int(at_s * 1e9)
        span = self.tracer.start_span(name, kind=kind, attributes=attrs, start_time=start)
        for event, offset_s in events:
            span.add_event(event, timestamp=start + int(offset_s * 1e9))
        span.end(end_time=start + 2_000_000_000)

    def spans(self) -> list:
        return list(self.exporter.get_finished_spans())


def publish(process: Process, task_id: str, at_s: float = 0) -> None:
    """What CeleryInstrumentor's before_task_publish writes."""
    process.span(f"apply_async/{TASK}", SpanKind.PRODUCER, {
        "celery.action": "apply_async", "messaging.message.id": task_id,
        "celery.task_name": TASK, "messaging.destination_kind": "queue",
        "messaging.destination": "celery",
    }, at_s)


def run(process: Process, task_id: str, at_s: float = 1, *, retries: Any = None,
        redelivered: bool = False, state: str = "SUCCESS", **extra: Any) -> None:
    """What CeleryInstrumentor's task_prerun/task_postrun write (retries left out at 0)."""
    attrs = {
        "celery.action": "run", "celery.state": state, "messaging.conversation_id": task_id,
        "messaging.destination": "celery",
        "celery.delivery_info": DELIVERY_INFO % redelivered,
        # The message's origin, written over the worker's hostname (utils.py does so).
        "messaging.message.id": task_id, "celery.hostname": "gen11@web1",
        "celery.task_name": TASK, **extra,
    }
    if retries is not None:
        attrs["celery.retries"] = retries
    events = attrs.pop("events", ())
    process.span(f"run/{TASK}", SpanKind.CONSUMER, attrs, at_s, events)
