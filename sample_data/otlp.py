"""The workload as OpenTelemetry spans, built with the real SDK.

One CONSUMER span per execution (start = `deliver`, lifecycle steps as span events named
by the event kind), one span per producer step, one per worker start/stop. Each process
is its own TracerProvider with its own Resource, as in production. A killed worker never
exports, so the executions that crashed are missing here (the truth lists them).

Files follow the OTLP JSON Lines format the Collector's file exporter writes: one
`ExportTraceServiceRequest` per line, protobuf JSON mapping with integer enums, and
trace/span ids as hex as the OTLP/JSON spec requires (plain protobuf JSON would write
base64). `parse_otlp_json_line` reads such a line back into the protobuf message.
"""

from __future__ import annotations

import base64
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import orjson
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from sample_data.clock import unix_ns
from sample_data.model import Execution, RawEvent
from sample_data.workload import Workload, open_out

SCOPE = "dupescope.sample_data"
BATCH_SPANS = 512
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
# Fields that identify the job; on an execution span they are span attributes, so span
# events carry only what is specific to the step.
_JOB_FIELDS = {"ts", "event", "job_id", "job_type", "idempotency_key", "resource_key",
               "queue", "delivery_attempt", "worker_id"}


class SeededIdGenerator(IdGenerator):
    """Trace and span ids from a seeded generator, so the same seed gives the same file."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


class ChunkingSpanProcessor(SpanProcessor):
    """Exports ended spans in fixed-size batches on the caller's thread.

    The SDK's BatchSpanProcessor flushes on a timer from a background thread, which makes
    line boundaries vary from run to run; this keeps them reproducible.
    """

    def __init__(self, exporter: SpanExporter, max_batch: int = BATCH_SPANS) -> None:
        self._exporter = exporter
        self._max_batch = max_batch
        self._buffer: list[ReadableSpan] = []
        self._closed = False

    def on_end(self, span: ReadableSpan) -> None:
        self._buffer.append(span)
        if len(self._buffer) >= self._max_batch:
            self.force_flush()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._exporter.export(batch)
        return True

    def shutdown(self) -> None:
        if not self._closed:
            self._closed = True
            self.force_flush()
            self._exporter.shutdown()


class OtlpJsonLinesExporter(SpanExporter):
    """Writes each export call as one OTLP JSON line to a binary stream."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._out.write(to_otlp_json(encode_spans(spans)) + b"\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._out.flush()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self._out.flush()
        return True


def _walk_ids(obj: Any, convert: Any) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _ID_FIELDS and isinstance(v, str):
                obj[k] = convert(v)
            else:
                _walk_ids(v, convert)
    elif isinstance(obj, list):
        for v in obj:
            _walk_ids(v, convert)


def to_otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """One OTLP/JSON document: protobuf JSON mapping, integer enums, hex ids."""
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    _walk_ids(doc, lambda v: base64.b64decode(v).hex())
    return orjson.dumps(doc)


def parse_otlp_json_line(line: bytes | str) -> ExportTraceServiceRequest:
    """Read one OTLP JSON line (hex ids) back into an ExportTraceServiceRequest."""
    doc = orjson.loads(line)
    _walk_ids(doc, lambda v: base64.b64encode(bytes.fromhex(v)).decode())
    return json_format.ParseDict(doc, ExportTraceServiceRequest())


class _Spans:
    """Builds every span of one workload through one processor."""

    def __init__(self, workload: Workload, processor: SpanProcessor) -> None:
        self.w = workload
        self.processor = processor
        self.ids = SeededIdGenerator(workload.seed)
        self.providers: dict[str, TracerProvider] = {}
        self.versions: dict[str, str] = {}
        for e in workload.raw:
            if e.fields["event"] == "worker_start":
                self.versions[e.emitter] = e.fields["service_version"]

    def tracer(self, emitter: str) -> trace.Tracer:
        provider = self.providers.get(emitter)
        if provider is None:
            host, _, pid = emitter.partition(":")
            role = ("job-worker" if host.startswith("host-")
                    else "outbox-relay" if host.startswith("outbox") else "shop-api")
            resource = Resource({
                "service.name": role,
                "service.version": self.versions.get(emitter, "2026.11.3"),
                "service.instance.id": emitter,
                "host.name": host,
                "process.pid": int(pid),
            })
            provider = TracerProvider(sampler=ALWAYS_ON, resource=resource,
                                      shutdown_on_exit=False, id_generator=self.ids)
            provider.add_span_processor(self.processor)
            self.providers[emitter] = provider
        return provider.get_tracer(SCOPE, "1")

    def job_attrs(self, f: dict[str, Any], celery: bool) -> dict[str, Any]:
        a: dict[str, Any] = {}
        if "job_id" in f:
            a["messaging.message.id"] = f["job_id"]
            a["job.job_id"] = f["job_id"]
        a["celery.task_name" if celery else "job.job_type"] = f["job_type"]
        a["messaging.system"] = "celery" if celery else "aws_sqs"
        a["messaging.destination.name"] = f["queue"]
        for name in ("idempotency_key", "resource_key", "delivery_attempt", "worker_id"):
            if name in f:
                a[f"job.{name}"] = f[name]
        return a

    def point_span(self, e: RawEvent, ns: int, name: str, attrs: dict[str, Any],
                   parent: SpanContext | None = None,
                   kind: SpanKind = SpanKind.INTERNAL) -> trace.Span:
        ctx = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        span = self.tracer(e.emitter).start_span(name, context=ctx, kind=kind,
                                                 attributes=attrs, start_time=ns)
        span.end(end_time=ns)
        return span

    def build(self) -> None:
        raw, skewed = self.w.raw, self.w.skewed_us
        by_ex: dict[int, list[int]] = defaultdict(list)
        job_ctx: dict[str, SpanContext] = {}
        for i, e in enumerate(raw):
            if e.ex >= 0:
                by_ex[e.ex].append(i)
                continue
            ns, f = unix_ns(skewed[i]), e.fields
            kind = f["event"]
            if e.job is None:  # worker_start / worker_stop
                self.point_span(e, ns, kind, {"job.event": kind, "job.worker_id": e.emitter,
                                              "job.service_version": f["service_version"]})
                continue
            attrs = {"job.event": kind, **self.job_attrs(f, e.job.jt.celery)}
            parent = job_ctx.get(e.job.job_id)
            if kind == "enqueue":
                attrs["messaging.operation.type"] = "publish"
                span = self.point_span(e, ns, f"{f['job_type']} publish", attrs, parent,
                                       SpanKind.PRODUCER)
            else:
                span = self.point_span(e, ns, kind, attrs, parent)
            job_ctx.setdefault(e.job.job_id, span.get_span_context())
            if kind == "enqueue":
                job_ctx[e.job.job_id] = span.get_span_context()
        for ex in self.w.model.executions:
            self.execution_span(ex, by_ex.get(ex.idx, []), job_ctx.get(ex.job.job_id))

    def execution_span(self, ex: Execution, idxs: list[int], parent: SpanContext | None) -> None:
        raw, skewed = self.w.raw, self.w.skewed_us
        if ex.end in ("crash", "lost"):
            # the killed process never exported; only its parent's settlement survives
            for i in idxs:
                e = raw[i]
                if e.emitter != ex.worker_id:
                    attrs = {"job.event": e.fields["event"], **self.job_attrs(e.fields, False)}
                    attrs.update({k: v for k, v in e.fields.items() if k not in _JOB_FIELDS})
                    if ex.job.jt.celery:
                        attrs["celery.task_name"] = attrs.pop("job.job_type")
                    self.point_span(e, unix_ns(skewed[i]), e.fields["event"], attrs, parent)
            return
        first = raw[idxs[0]]
        f = first.fields
        attrs = self.job_attrs(f, ex.job.jt.celery)
        attrs["messaging.operation.type"] = "process"
        attrs["job.visibility_timeout_ms"] = f["visibility_timeout_ms"]
        ctx = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        span = self.tracer(first.emitter).start_span(
            f"{f['job_type']} process", context=ctx, kind=SpanKind.CONSUMER,
            attributes=attrs, start_time=unix_ns(skewed[idxs[0]]))
        for i in idxs[1:]:
            e = raw[i]
            span.add_event(e.fields["event"], timestamp=unix_ns(skewed[i]), attributes={
                k: v for k, v in e.fields.items() if k not in _JOB_FIELDS})
        last = raw[idxs[-1]].fields
        if last["event"] == "fail":
            span.set_status(Status(StatusCode.ERROR, last.get("reason")))
        span.end(end_time=unix_ns(skewed[idxs[-1]]))

    def close(self) -> None:
        for provider in self.providers.values():
            provider.force_flush()
        self.processor.shutdown()


def export_spans(workload: Workload, exporter: SpanExporter,
                 max_batch: int = BATCH_SPANS) -> None:
    """Build the workload's spans and hand them to any SpanExporter in fixed batches."""
    spans = _Spans(workload, ChunkingSpanProcessor(exporter, max_batch))
    spans.build()
    spans.close()


def write_otlp_jsonl(workload: Workload, out: IO[bytes]) -> None:
    export_spans(workload, OtlpJsonLinesExporter(out))


def write_otlp_jsonl_file(workload: Workload, path: str | Path) -> Path:
    """The workload as OTLP JSON Lines in a file (gzip when the name ends in .gz)."""
    with open_out(path) as out:
        write_otlp_jsonl(workload, out)
    return Path(path)


def send_otlp_http(workload: Workload, endpoint: str) -> None:
    """Send the workload to a running collector over OTLP/HTTP (protobuf)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    export_spans(workload, OTLPSpanExporter(endpoint=endpoint))
