"""OTLP export requests of job execution spans, built directly as protobuf messages.

Many distinct, realistic request bodies cheaply, without running the workload model or the
OpenTelemetry SDK: what the collector's tests, its fuzz seeds and its throughput benchmark
send. Seeded, so a body is the same on every run.
"""

from __future__ import annotations

import random

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

T0 = 1_760_000_000_000_000_000


def _kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


STEPS = ("lock_acquire", "side_effect", "ack")


def trace_request(
    batch: int, spans: int = 1000, seed: int = 0, steps: int = 3
) -> ExportTraceServiceRequest:
    """One export request of `spans` job execution spans; `batch` makes its ids unique.

    Each span has 3 span events; the first `steps` are lifecycle steps (a row each), the
    rest are ordinary events (`log`) that the collector reads past.
    """
    rng = random.Random(seed * 1_000_003 + batch)
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend([
        _kv("service.name", "billing-worker"), _kv("host.name", f"worker-{batch % 4}"),
        _kv("process.pid", 4000 + batch % 4), _kv("service.version", "1.2.3"),
    ])
    scope = resource_spans.scope_spans.add()
    scope.scope.name = "dupescope.bench"
    for i in range(spans):
        n = batch * spans + i
        span = scope.spans.add()
        span.trace_id = rng.randbytes(16)
        span.span_id = rng.randbytes(8)
        span.name = "process invoice"
        span.kind = 5
        span.start_time_unix_nano = T0 + n * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 50_000_000
        span.attributes.extend([
            _kv("messaging.message.id", f"b{batch}-msg-{i}"),
            _kv("messaging.destination.name", "invoices"),
            _kv("messaging.operation.type", "process"),
            _kv("job.job_type", "create_invoice"),
            _kv("job.idempotency_key", f"order-{n // 2}"),
            _kv("job.delivery_attempt", 1 + n % 2),
            _kv("job.visibility_timeout_ms", 30_000),
            _kv("job.resource_key", f"account-{n % 50}"),
            _kv("http.status_code", 200),
            _kv("retry", False),
        ])
        for step, name in enumerate(STEPS, start=1):
            event = span.events.add()
            event.name = name if step <= steps else "log"
            event.time_unix_nano = span.start_time_unix_nano + step * 10_000_000
            if step == 1:
                event.attributes.extend([
                    _kv("lock_key", f"lock:order-{n // 2}"), _kv("lock_owner", f"w-{n}"),
                    _kv("lock_ttl_ms", 10_000),
                ])
    return request
