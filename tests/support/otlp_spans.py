"""OTLP trace requests built for the decoder tests: every span shape the contract allows
and broken ones (`mixed_request`), one span with bare step events (`job_span`), and a
field mapping that renames fields and events (`MAPPING`)."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from collectors.mapping import FieldMapping

MAPPING = FieldMapping(
    fields={"job_id": ("task.uuid",), "resource_key": ("job_id",), "ts": ("when",)},
    events={"task-received": "deliver"},
)


def key_value(key: str, value: Any) -> KeyValue:
    """An OTLP attribute holding `value` as its own type (lists and dicts nested)."""
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, bytes):
        return KeyValue(key=key, value=AnyValue(bytes_value=value))
    if isinstance(value, list):
        kv = KeyValue(key=key)
        kv.value.array_value.values.extend(key_value("", v).value for v in value)
        return kv
    if isinstance(value, dict):
        kv = KeyValue(key=key)
        kv.value.kvlist_value.values.extend(key_value(k, v) for k, v in value.items())
        return kv
    if value is None:
        return KeyValue(key=key)
    return KeyValue(key=key, value=AnyValue(string_value=value))


def mixed_request(seed: int) -> ExportTraceServiceRequest:
    """Every span shape the contract allows, and broken ones, with overlapping attributes."""
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    for r in range(2):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            [key_value("host.name", f"h{r}"), key_value("process.pid", 10 + r),
             key_value("queue", "from-resource")]
        )
        scope = resource_spans.scope_spans.add()
        for i in range(60):
            span = scope.spans.add()
            span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
            if rng.random() < 0.5:
                span.parent_span_id = rng.randbytes(8)
            span.name = rng.choice(["process", "deliver", "side_effect", "ack", "GET /", "x"])
            span.start_time_unix_nano = 1_760_000_000_000_000_000 + i * 1000
            span.end_time_unix_nano = span.start_time_unix_nano + 5000
            pool = {
                "job.job_id": f"j{i}", "messaging.message.id": f"m{i}",
                "job.event": rng.choice(["commit", "nope"]), "event": "nack",
                "messaging.operation.type": rng.choice(["process", "publish"]),
                "delivery_attempt": rng.choice([1, 0, "2"]), "tags": ["a", 1],
                "nested": {"k": "v", "n": 2}, "blob": b"\x01\x02", "ratio": 0.5,
                "empty": None, "queue": "q", "flag": True,
            }
            for key in rng.sample(sorted(pool), rng.randrange(0, len(pool))):
                span.attributes.append(key_value(key, pool[key]))
            for e in range(rng.randrange(0, 4)):
                event = span.events.add()
                event.name = rng.choice(["lock_acquire", "exception", "ack", "side_effect"])
                event.time_unix_nano = span.start_time_unix_nano + e
                if rng.random() < 0.6:
                    event.attributes.extend([
                        key_value("lock_key", "L"), key_value("job.job_id", f"e{i}"),
                        key_value("queue", "ev"),
                        key_value("lock_ttl_ms", rng.choice([100, "bad"])),
                    ])
    return request


def job_span(name: str, events: list[tuple[str, int]], *attributes: KeyValue):
    """A request of one span called `name` with `attributes` and attribute-less span
    events (name, time in ns)."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, name
    span.start_time_unix_nano = 1_760_000_000_000_000_000
    span.end_time_unix_nano = span.start_time_unix_nano + 50_000_000
    span.attributes.extend(attributes)
    for event_name, time_ns in events:
        event = span.events.add()
        event.name, event.time_unix_nano = event_name, time_ns
    return request


def str_attr(key: str, value: str) -> KeyValue:
    """A string attribute."""
    return KeyValue(key=key, value=AnyValue(string_value=value))


#: A time (ns) inside `job_span`'s span, for its step events.
T = 1_760_000_000_010_000_000
