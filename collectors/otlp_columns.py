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
from collectors.otlp import (
    PRODUCER_EVENTS,
    SETTLE_INDEX,
    SPAN_INDEX,
    attributes,
    end_settle,
    execution_of,
    first_deliver,
    looks_like_execution,
    producer_attrs,
    record_row,
    span_attrs_of,
    span_event,
    span_place,
    spans,
    step_parents,
)
from store.contract import EVENT_KINDS, UID_DIGEST_SIZE, UID_SEPARATOR
from store.schema import EVENTS_SCHEMA, empty_table

_KINDS = frozenset(EVENT_KINDS)
_SEP = UID_SEPARATOR
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
    digest = hashlib.blake2b(digest_size=UID_DIGEST_SIZE)
    digest.update(trace_id.encode())
    digest.update(_SEP)
    digest.update(span_id.encode())
    digest.update(_SEP)
    return digest


def _uid(prefix: Any, index: int) -> str:
    """content_uid(trace_id, span_id, index), finishing a hash begun once per span."""
    digest = prefix.copy()
    digest.update(b"%d%b" % (index, _SEP))
    return digest.hexdigest()


def rows_table(rows: list[Row]) -> pa.Table:
    """Rows -> the canonical table; pyarrow walks the dicts in C."""
    if not rows:
        return empty_table()
    return pa.Table.from_pylist(rows, schema=EVENTS_SCHEMA)


class _Shared:
    """What every row of one span shares, normalised once: the span's own canonical
    fields, its leftover attributes, and which canonical fields those came from."""

    __slots__ = ("fields", "rest", "fed")

    def __init__(self, fields: Row, rest: dict[str, Any], fed: set[str]) -> None:
        self.fields, self.rest, self.fed = fields, rest, fed


def _share(
    span_attrs: dict[str, Any], trace_id: str, span_id: str, normaliser: Normaliser,
    reserved: frozenset[str],
) -> _Shared | None:
    """None when the span itself spells a timestamp or an event: the plain path decides."""
    rest = dict(span_attrs)
    if rest.keys() & reserved:
        return None
    rest.setdefault("trace_id", trace_id)
    rest.setdefault("span_id", span_id)
    present = normaliser.source_keys(rest)
    try:
        fields = normaliser.fields(rest, present)
    except RecordError:
        return None
    return _Shared(fields, rest, normaliser.fed_by(present))


def _shared_row(
    shared: _Shared, extra: dict[str, Any], event: str, time_ns: int, uid: str, source: str,
    execution_id: str | None, normaliser: Normaliser, reserved: frozenset[str],
) -> Row | None:
    """The row `normalise` would give for span attrs + `extra`, or None to take that path.

    Equal by construction when `extra` spells no timestamp or event and feeds no canonical
    field the span already feeds: then the two halves normalise independently.
    """
    fields: Row = {}
    if extra:
        present = normaliser.source_keys(extra)
        if present:
            if present & reserved or normaliser.fed_by(present) & shared.fed:
                return None
            try:
                fields = normaliser.fields(extra, present)
            except RecordError:
                return None
    name = normaliser.event_name(event)
    if name is None:
        return None
    row: Row = {"event_uid": uid, "ts": time_ns // 1_000, "event": name,
                "source": source, **shared.fields, **fields}
    rest = {**shared.rest, **extra} if extra else dict(shared.rest)
    if execution_id is not None and "execution_id" not in rest:
        rest["execution_id"] = execution_id
    try:
        row = normaliser.finish(row, rest)
    except RecordError:
        return None
    row["execution_id"] = rest.get("execution_id", execution_id)
    return row


def _reserved(normaliser: Normaliser) -> frozenset[str]:
    """Spellings of `ts` and `event`: a span row sets those itself."""
    return frozenset(normaliser.sources_of("ts")) | frozenset(normaliser.sources_of("event"))


def decode_traces_rows(
    request: ExportTraceServiceRequest,
    normaliser: Normaliser,
    source: str,
    only: frozenset[tuple[int, int, int]] | None = None,
) -> tuple[list[Row], list[Rejected], int]:
    """Rows, rejected records and the count of spans that are not job events.

    `only` limits the work to the spans at those (resource, scope, span) indices.
    """
    rows: list[Row] = []
    rejected: list[Rejected] = []
    ignored = 0
    kinds = _KINDS
    reserved = _reserved(normaliser)
    executions = step_parents(request)
    for at, base, span in spans(request, fast_attributes):
        if only is not None and at not in only:
            continue
        own_attrs = fast_attributes(span.attributes)
        span_attrs = span_attrs_of(base, own_attrs)
        name = span.name
        own_event = span_event(name, span_attrs, span.kind)
        events = span.events
        steps = [(i, e) for i, e in enumerate(events) if e.name in kinds] if events else []
        if own_event is None:
            if not (
                steps
                or span.span_id in executions
                or looks_like_execution(span_attrs)
            ):
                ignored += 1
                continue
            own_event = "deliver"
        trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
        execution_id = execution_of(span, own_event, span_id, bool(steps))
        where = span_place(source, at)
        prefix = _uid_prefix(trace_id, span_id)
        # Sharing pays off from two rows on; a lone span row takes the plain path.
        shared = (
            _share(span_attrs, trace_id, span_id, normaliser, reserved) if steps else None
        )

        own_extra: dict[str, Any] = {"span.name": name}
        if own_event == "deliver":
            own_extra["span.end_us"] = span.end_time_unix_nano // 1_000
        # As in otlp._decode_span: a `deliver` span event is the delivery.
        delivered_at = first_deliver(steps) if own_event == "deliver" else None
        records: list[tuple[int, int, str, Any, str]] = []
        if delivered_at is None:
            records.append(
                (SPAN_INDEX, span.start_time_unix_nano, own_event, own_extra, where)
            )
        for index, step in steps:
            records.append(
                (index, step.time_unix_nano, step.name, step, f"{where} event {index}")
            )
        settled = (
            end_settle(span, own_attrs, span_attrs, steps)
            if own_event == "deliver" else None
        )
        if settled is not None:
            records.append((SETTLE_INDEX, span.end_time_unix_nano, settled[0],
                            settled[1], f"{where} end"))

        for index, time_ns, event, extra, place in records:
            uid = _uid(prefix, index)
            row_attrs = span_attrs
            if index >= 0:
                extra = fast_attributes(extra.attributes) if extra.attributes else {}
                if index == delivered_at:
                    extra = {**extra, **own_extra}
            elif index == SPAN_INDEX and own_event in PRODUCER_EVENTS:
                row_attrs = producer_attrs(span_attrs, base, own_attrs, normaliser)
            if shared is not None and row_attrs is span_attrs:
                row = _shared_row(shared, dict(extra), event, time_ns, uid, source,
                                  execution_id, normaliser, reserved)
                if row is not None:
                    rows.append(row)
                    continue
            attrs = {**row_attrs, **extra, "event": event}
            try:
                row = record_row(attrs, time_ns, trace_id, span_id, execution_id, uid,
                                 normaliser, source)
            except RecordError as exc:
                rejected.append(Rejected(place, str(exc)))
                continue
            rows.append(row)
    return rows, rejected, ignored


def decode_traces_table(
    request: ExportTraceServiceRequest, normaliser: Normaliser, source: str
) -> tuple[pa.Table, list[Rejected], int]:
    rows, rejected, ignored = decode_traces_rows(request, normaliser, source)
    return rows_table(rows), rejected, ignored
