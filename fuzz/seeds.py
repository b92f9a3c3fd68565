"""The seed corpus of the OTLP target, written from the bodies the tests and the sample
data build (never committed: `make fuzz` writes it to fuzz/seeds/otlp/).

Each seed is a small ExportTraceServiceRequest body of a few spans: the requests of the
tests' builders (every span shape the contract allows and broken ones, the benchmark's
execution spans, CeleryInstrumentor's spans) and of sample_data (the real SDK's spans of
a generated workload), cut into requests of up to four spans, so the fuzzer mutates
bodies of a few hundred bytes, not of a thousand spans.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

SEEDS = ROOT / "fuzz" / "seeds" / "otlp"
SPANS_PER_SEED = 2


def split(request: ExportTraceServiceRequest, size: int = SPANS_PER_SEED
          ) -> Iterator[ExportTraceServiceRequest]:
    """Requests of up to `size` spans each, every one with its resource and scope."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            spans = list(scope_spans.spans)
            for start in range(0, max(len(spans), 1), size):
                part = ExportTraceServiceRequest()
                rs = part.resource_spans.add()
                rs.resource.CopyFrom(resource_spans.resource)
                rs.schema_url = resource_spans.schema_url
                ss = rs.scope_spans.add()
                ss.scope.CopyFrom(scope_spans.scope)
                ss.schema_url = scope_spans.schema_url
                ss.spans.extend(spans[start:start + size])
                yield part


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []

    def export(self, spans) -> SpanExportResult:  # type: ignore[no-untyped-def]
        self.requests.append(encode_spans(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def sample_data_requests() -> Iterator[ExportTraceServiceRequest]:
    """The real SDK's spans of a small generated workload (sample_data/otlp.py)."""
    from sample_data.otlp import export_spans
    from sample_data.workload import generate

    exporter = _Collect()
    export_spans(generate(seed=3, target_events=400, hours=0.2), exporter, max_batch=64)
    for request in exporter.requests[:6]:
        yield from list(split(request))[:12]


def test_requests() -> Iterator[ExportTraceServiceRequest]:
    """What the decoder tests build: mixed shapes, bench spans, Celery spans, edge cases."""
    from support import celery_spans as celery
    from support.otlp_spans import T, job_span, mixed_request, str_attr

    from sample_data.otlp_requests import trace_request

    for seed in range(3):
        yield from split(mixed_request(seed))
    for steps in (0, 1, 3):
        yield from list(split(trace_request(1, 8, steps=steps)))[:2]
    worker, producer = celery.Process(celery.WORKER), celery.Process(celery.PRODUCER)
    celery.publish(producer, "t-1")
    celery.run(worker, "t-1", retries=1, redelivered=True)
    celery.run(worker, "t-2", state="RETRY", events=(("ack", 0.5),))
    yield encode_spans(producer.spans() + worker.spans())
    steps = [("side_effect", T), ("commit", T + 1), ("ack", 2**64 - 1)]
    yield job_span("process", steps, str_attr("messaging.message.id", "m-1"))
    yield job_span("worker_start", [("worker_stop", T), ("ack", T)])
    odd = job_span("process", [("ack", T)], str_attr("job.job_id", "j"))
    odd.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x07" * 64
    span = odd.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.append(KeyValue(key="note", value=AnyValue(string_value='a"\\\x1fé')))
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, trace_state="k=v")
    span.status.message = "boom"
    yield odd
    # Fields read past, which protobuf's parser still checks: nested values on an event
    # that is no step, an entity ref, a value given as a string table index.
    rare = trace_request(2, 2, steps=2)
    tags = KeyValue(key="tags")
    tags.value.array_value.values.add().kvlist_value.values.append(
        KeyValue(key="k", value=AnyValue(string_value="v")))
    rare.resource_spans[0].scope_spans[0].spans[0].events[2].attributes.append(tags)
    rare.resource_spans[0].resource.entity_refs.add(type="service", id_keys=["service.name"])
    rare.resource_spans[0].scope_spans[0].spans[1].attributes.append(
        KeyValue(key="note", value=AnyValue(string_value_strindex=1)))
    yield rare


def bodies() -> list[bytes]:
    found = [r.SerializeToString() for r in (*test_requests(), *sample_data_requests())]
    return [b"", *dict.fromkeys(found)]


def main() -> None:
    SEEDS.mkdir(parents=True, exist_ok=True)
    for old in SEEDS.iterdir():
        old.unlink()
    written = bodies()
    for body in written:
        (SEEDS / hashlib.sha1(body).hexdigest()).write_bytes(body)
    print(f"wrote {len(written)} seeds ({sum(map(len, written))} bytes) to "
          f"{SEEDS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
