"""OTLP traces and logs (protobuf messages) -> canonical rows.

A job execution arrives either as one span whose span events are the lifecycle steps
(named by the event kind), or as child spans whose name or `job.event` attribute is the
event. Both shapes give the same rows. Spans that name no lifecycle step are ignored: a
collector receives whole traces, and most spans are not job events.

A PRODUCER span (or Celery's publish span) is an `enqueue`, whatever else it carries, and
producer events take no worker_id from the resource: the producer is no worker. An
execution span that carries its own `deliver` span event has that one delivery, not a
second one at the span's start. Celery-instrumented spans: collectors/celery_spans.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collectors import celery_spans
from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser, RecordError, Row
from collectors.timestamps import Nanos
from store.contract import (
    ATTEMPT_KEYS,
    EVENT_KINDS,
    EXECUTION_STEPS,
    JOB_ID_KEYS,
    OPERATION_EVENTS,
    OPERATION_KEYS,
    PRODUCER_KINDS,
    RESOURCE_WORKER_ID,
    SETTLE_KINDS,
    SETTLE_ROW_INDEX,
    SPAN_ROW_INDEX,
    content_uid,
)

_KINDS = frozenset(EVENT_KINDS)
#: Steps inside an execution: as a child span, their parent span is the execution.
WORKER_STEPS = frozenset(EXECUTION_STEPS)
#: Events of the producer's side: a worker_id of theirs is never the resource's.
PRODUCER_EVENTS = frozenset(PRODUCER_KINDS)
SPAN_KIND_PRODUCER = Span.SpanKind.SPAN_KIND_PRODUCER
#: The uid index of the settle a span's end implies, and of the span's own row.
SETTLE_INDEX = SETTLE_ROW_INDEX
SPAN_INDEX = SPAN_ROW_INDEX


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def span_event(name: str, attrs: dict[str, Any], kind: int = 0) -> str | None:
    """The lifecycle step a span itself records, if any."""
    # A PRODUCER span naming a job (any other is some other library's message) is its
    # enqueue, as is Celery's publish span.
    publish = celery_spans.is_publish(name, attrs) or (
        kind == SPAN_KIND_PRODUCER and any(k in attrs for k in JOB_ID_KEYS)
    )
    for key in ("job.event", "event"):
        value = attrs.get(key)
        if isinstance(value, str) and value in _KINDS:
            return "enqueue" if publish and value == "deliver" else value
    if name in _KINDS:
        return "enqueue" if publish and name == "deliver" else name
    if publish:
        return "enqueue"
    for key in OPERATION_KEYS:
        operation = attrs.get(key)
        if operation is not None:
            # A poll's `receive` span (boto3sqs makes one per ReceiveMessage call) names
            # no message: the deliveries are the `process` spans it starts.
            if str(operation) == "receive" and not any(k in attrs for k in JOB_ID_KEYS):
                return None
            return OPERATION_EVENTS.get(str(operation))
    if celery_spans.is_run(attrs):
        return "deliver"
    return None


def span_attrs_of(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """A span's attributes over its resource's, with what a Celery span implies."""
    attrs = {**base, **own}
    if not own.keys().isdisjoint(celery_spans.KEYS):
        attrs.update(celery_spans.derived(attrs))
    return attrs


def producer_attrs(
    attrs: dict[str, Any], base: dict[str, Any], own: dict[str, Any], normaliser: Normaliser
) -> dict[str, Any]:
    """`attrs` without the worker_id spellings that came from the resource alone."""
    dropped = [
        key for key in normaliser.sources_of("worker_id") if key in base and key not in own
    ]
    if not dropped:
        return attrs
    return {k: v for k, v in attrs.items() if k not in dropped}


_SETTLES = frozenset(SETTLE_KINDS)


def end_settle(
    span: Any, own: dict[str, Any], attrs: dict[str, Any], steps: list[tuple[int, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """The settle a Celery run span's end records, where the span names no events itself."""
    if "job.event" in own or "event" in own or any(e.name in _SETTLES for _, e in steps):
        return None
    return celery_spans.settle(attrs, lambda: _failure(span))


def _failure(span: Any) -> str:
    """`Type: message` of the span's recorded exception, else its status message."""
    for event in span.events:
        if event.name == "exception":
            found = attributes(event.attributes)
            kind, message = found.get("exception.type"), found.get("exception.message")
            if kind:
                return f"{kind}: {message}" if message else str(kind)
    return span.status.message


def first_deliver(steps: list[tuple[int, Any]]) -> int | None:
    """The index of the first `deliver` among a span's step events, if any."""
    for index, step in steps:
        if step.name == "deliver":
            return index
    return None


def worker_identity(resource: dict[str, Any]) -> dict[str, Any]:
    """host:pid from resource attributes, the contract's usual worker_id.

    Kept under its own name so that a worker_id set on the span or record itself wins (a
    tracer provider created before a pool forks carries the parent's pid).
    """
    host, pid = resource.get("host.name"), resource.get("process.pid")
    if host is not None and pid is not None:
        return {RESOURCE_WORKER_ID: f"{host}:{pid}"}
    return {}


def step_parents(request: ExportTraceServiceRequest) -> set[bytes]:
    """Spans that have lifecycle steps as child spans: those are executions."""
    parents: set[bytes] = set()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if span.parent_span_id and span.name in WORKER_STEPS:
                    parents.add(span.parent_span_id)
                elif span.parent_span_id:
                    for attr in span.attributes:
                        if attr.key in ("job.event", "event") and (
                            attr.value.string_value in WORKER_STEPS
                        ):
                            parents.add(span.parent_span_id)
    return parents


def looks_like_execution(attrs: dict[str, Any]) -> bool:
    """A span naming a job and its delivery attempt, with no step of its own, is a run."""
    return any(k in attrs for k in JOB_ID_KEYS) and any(k in attrs for k in ATTEMPT_KEYS)


def decode_traces(
    request: ExportTraceServiceRequest, normaliser: Normaliser, source: str
) -> Decoded:
    out = Decoded()
    executions = step_parents(request)
    for at, base, span in spans(request):
        _decode_span(span, base, normaliser, source, span_place(source, at), out, executions)
    return out


def spans(
    request: ExportTraceServiceRequest,
    read: Callable[[Any], dict[str, Any]] = attributes,
) -> Iterator[tuple[tuple[int, int, int], dict[str, Any], Any]]:
    """Each span with its (resource, scope, span) indices and `base`, its resource's
    attributes (read by `read`) with the worker identity they give."""
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = read(resource_spans.resource.attributes)
        base = {**resource, **worker_identity(resource)}
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            for p_index, span in enumerate(scope_spans.spans):
                yield (r_index, s_index, p_index), base, span


def span_place(source: str, at: tuple[int, int, int]) -> str:
    """Where a span stands in its request, as a rejected record names it."""
    return f"{source}: resource_spans[{at[0]}].scope_spans[{at[1]}].spans[{at[2]}]"


def _decode_span(
    span: Any,
    base: dict[str, Any],
    normaliser: Normaliser,
    source: str,
    where: str,
    out: Decoded,
    executions: set[bytes],
) -> None:
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    own_attrs = attributes(span.attributes)
    span_attrs = span_attrs_of(base, own_attrs)
    own_event = span_event(span.name, span_attrs, span.kind)
    steps = [(i, e) for i, e in enumerate(span.events) if e.name in _KINDS]
    if own_event is None and (
        steps or span.span_id in executions or looks_like_execution(span_attrs)
    ):
        own_event = "deliver"  # an execution span: its start is the delivery
    if own_event is None:
        out.ignored += 1
        return
    execution_id = execution_of(span, own_event, span_id, bool(steps))

    records: list[tuple[int, int, dict[str, Any], str]] = []
    # A `deliver` span event is the execution's delivery: the span's start is not another.
    delivered_at = first_deliver(steps) if own_event == "deliver" else None
    span_row = {"span.name": span.name}
    if own_event == "deliver":
        span_row["span.end_us"] = span.end_time_unix_nano // 1_000
    if delivered_at is None:
        attrs = span_attrs
        if own_event in PRODUCER_EVENTS:
            attrs = producer_attrs(span_attrs, base, own_attrs, normaliser)
        own = {**attrs, "event": own_event, **span_row}
        records.append((SPAN_INDEX, span.start_time_unix_nano, own, where))
    for index, step in steps:
        attrs = {**span_attrs, **attributes(step.attributes), "event": step.name}
        if index == delivered_at:
            attrs.update(span_row)
        records.append((index, step.time_unix_nano, attrs, f"{where} event {index}"))
    settled = end_settle(span, own_attrs, span_attrs, steps) if own_event == "deliver" else None
    if settled is not None:
        attrs = {**span_attrs, **settled[1], "event": settled[0]}
        records.append((SETTLE_INDEX, span.end_time_unix_nano, attrs, f"{where} end"))

    for index, time_ns, attrs, place in records:
        uid = content_uid(trace_id, span_id, index)
        try:
            row = record_row(attrs, time_ns, trace_id, span_id, execution_id, uid,
                             normaliser, source)
        except RecordError as exc:
            out.rejected.append(Rejected(place, str(exc)))
            continue
        out.rows.append(row)


def execution_of(span: Any, own_event: str, span_id: str, has_steps: bool) -> str | None:
    """The execution a span's rows belong to: a worker step's is its parent span; a span
    with lifecycle events, or a delivery, is an execution itself; others belong to none."""
    if own_event in WORKER_STEPS and span.parent_span_id:
        return str(span.parent_span_id.hex())
    if has_steps or own_event == "deliver":
        return span_id
    return None


def record_row(
    attrs: dict[str, Any], time_ns: int, trace_id: str, span_id: str,
    execution_id: str | None, uid: str, normaliser: Normaliser, source: str,
) -> Row:
    """The row of one of a span's records (`attrs`, consumed): its time, and the span's ids
    where the record names none. Raises RecordError."""
    attrs.pop("job.event", None)
    attrs["ts"] = Nanos(time_ns)
    attrs.setdefault("trace_id", trace_id)
    attrs.setdefault("span_id", span_id)
    if execution_id is not None:
        attrs.setdefault("execution_id", execution_id)
    row = normaliser.normalise(attrs, uid=uid, source=source)
    row["execution_id"] = attrs.get("execution_id", execution_id)
    return row


def decode_logs(request: ExportLogsServiceRequest, normaliser: Normaliser, source: str) -> Decoded:
    """Log records: attributes plus a structured body; a text body is kept as `msg`."""
    out = Decoded()
    for r_index, resource_logs in enumerate(request.resource_logs):
        resource = attributes(resource_logs.resource.attributes)
        base = {**resource, **worker_identity(resource)}
        for s_index, scope_logs in enumerate(resource_logs.scope_logs):
            for l_index, record in enumerate(scope_logs.log_records):
                where = f"{source}: log record {r_index}.{s_index}.{l_index}"
                attrs = {**base, **attributes(record.attributes)}
                body = any_value(record.body)
                if isinstance(body, dict):
                    attrs.update(body)
                elif body is not None:
                    attrs.setdefault("msg", body)
                if "ts" not in attrs and not any(k in attrs for k in ("timestamp", "time")):
                    attrs["ts"] = Nanos(record.time_unix_nano or record.observed_time_unix_nano)
                if record.trace_id:
                    attrs.setdefault("trace_id", record.trace_id.hex())
                if record.span_id:
                    attrs.setdefault("span_id", record.span_id.hex())
                uid = content_uid(record.SerializeToString(deterministic=True))
                try:
                    out.rows.append(normaliser.normalise(attrs, uid=uid, source=source))
                except RecordError as exc:
                    out.rejected.append(Rejected(where, str(exc)))
    return out
