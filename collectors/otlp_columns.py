"""OTLP traces -> one Arrow table in a single pass: the collector's hot path.

Gives exactly the rows of `collectors.otlp.decode_traces` (a test holds the two equal),
but touches each protobuf field once: resource attributes are converted once per
resource, a span's attributes once per span however many lifecycle rows it yields, the
event_uid hash of a span's ids is computed once and only finished per row, and rows go
straight into the Arrow table. Reading fields out of protobuf messages is most of the
cost of a collector written in Python, so every field read that can be shared is shared.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collectors.jsonlines import Rejected
from collectors.normalise import Normaliser, RecordError, Row
from collectors.otlp import _WORKER_STEPS, _span_event, _worker_identity, attributes
from store.schema import EVENT_KINDS, EVENTS_SCHEMA

_KINDS = frozenset(EVENT_KINDS)
_SEP = b"\x1f"
_SCALARS = frozenset({"string_value", "int_value", "bool_value", "double_value"})


def fast_attributes(pairs: Any) -> dict[str, Any]:
    """Like `otlp.attributes`, with the common scalar kinds read without recursion."""
    out: dict[str, Any] = {}
    for kv in pairs:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind in _SCALARS:
            out[kv.key] = getattr(value, kind)
        elif kind is None:
            out[kv.key] = None
        else:
            out[kv.key] = attributes([kv])[kv.key]
    return out


def _uid_prefix(trace_id: str, span_id: str) -> Any:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(trace_id.encode())
    digest.update(_SEP)
    digest.update(span_id.encode())
    digest.update(_SEP)
    return digest


def _uid(prefix: Any, index: int) -> str:
    """content_uid(trace_id, span_id, index), finishing a hash begun once per span."""
    digest = prefix.copy()
    digest.update(b"%d\x1f" % index)
    return digest.hexdigest()


def rows_table(rows: list[Row]) -> pa.Table:
    """Rows -> the canonical table; pyarrow walks the dicts in C."""
    if not rows:
        return EVENTS_SCHEMA.empty_table()
    return pa.Table.from_pylist(rows, schema=EVENTS_SCHEMA)


def decode_traces_rows(
    request: ExportTraceServiceRequest, normaliser: Normaliser, source: str
) -> tuple[list[Row], list[Rejected], int]:
    """Rows, rejected records and the count of spans that are not job events."""
    rows: list[Row] = []
    rejected: list[Rejected] = []
    ignored = 0
    normalise = normaliser.normalise
    kinds = _KINDS
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = fast_attributes(resource_spans.resource.attributes)
        base = {**resource, **_worker_identity(resource)}
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            for p_index, span in enumerate(scope_spans.spans):
                span_attrs = {**base, **fast_attributes(span.attributes)}
                name = span.name
                own_event = _span_event(name, span_attrs)
                events = span.events
                steps = [(i, e) for i, e in enumerate(events) if e.name in kinds] if events else []
                if own_event is None:
                    if not steps:
                        ignored += 1
                        continue
                    own_event = "deliver"
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                parent = span.parent_span_id
                if own_event in _WORKER_STEPS and parent:
                    execution_id: str | None = parent.hex()
                elif steps or own_event == "deliver":
                    execution_id = span_id
                else:
                    execution_id = None
                where = (
                    f"{source}: resource_spans[{r_index}].scope_spans[{s_index}].spans[{p_index}]"
                )
                prefix = _uid_prefix(trace_id, span_id)

                own = {**span_attrs, "event": own_event, "span.name": name}
                if steps:
                    own["span.end_us"] = span.end_time_unix_nano // 1_000
                records = [(-1, span.start_time_unix_nano, own, where)]
                for index, step in steps:
                    step_attrs = step.attributes
                    attrs = (
                        {**span_attrs, **fast_attributes(step_attrs), "event": step.name}
                        if step_attrs
                        else {**span_attrs, "event": step.name}
                    )
                    records.append((index, step.time_unix_nano, attrs, f"{where} event {index}"))

                for index, time_ns, attrs, place in records:
                    attrs.pop("job.event", None)
                    attrs["ts"] = time_ns
                    attrs.setdefault("trace_id", trace_id)
                    attrs.setdefault("span_id", span_id)
                    if execution_id is not None:
                        attrs.setdefault("execution_id", execution_id)
                    try:
                        row = normalise(attrs, uid=_uid(prefix, index), source=source)
                    except RecordError as exc:
                        rejected.append(Rejected(place, str(exc)))
                        continue
                    row["execution_id"] = attrs.get("execution_id", execution_id)
                    rows.append(row)
    return rows, rejected, ignored


def decode_traces_table(
    request: ExportTraceServiceRequest, normaliser: Normaliser, source: str
) -> tuple[pa.Table, list[Rejected], int]:
    rows, rejected, ignored = decode_traces_rows(request, normaliser, source)
    return rows_table(rows), rejected, ignored
