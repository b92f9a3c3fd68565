"""Emitting one event to every sink, without ever breaking the job that emits it."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from dupescope.instrument.fields import log_fields, span_attributes
from dupescope.instrument.logging_sink import log_event
from dupescope.instrument.sinks import Sinks

_log = logging.getLogger(__name__)


def trace_ids(span: Span | None) -> dict[str, str]:
    """The span's ids in hex, so log lines link to the trace (and the timeline to the UI)."""
    if span is None:
        return {}
    context = span.get_span_context()
    if not context.is_valid:
        return {}
    return {
        "trace_id": trace.format_trace_id(context.trace_id),
        "span_id": trace.format_span_id(context.span_id),
    }


def emit_log(sinks: Sinks, ts_ns: int, event: str, fields: Mapping[str, Any]) -> None:
    """The event as a JSON log line, when the sinks name a logger."""
    logger = sinks.log()
    if logger is None:
        return
    try:
        log_event(logger, log_fields(ts_ns, event, fields))
    except Exception:  # a sink's error is reported, never raised into the job
        _log.exception("dupescope: could not log %s", event)


def add_span_event(
    sinks: Sinks,
    span: Span | None,
    ts_ns: int,
    event: str,
    attrs: Mapping[str, Any],
    fields: Mapping[str, Any],
) -> None:
    """A lifecycle step as a span event named by its kind, on the execution span.

    When that span has already ended (another instrumentation closed it first), the step
    becomes a child span of it instead, carrying the job's fields: the contract's other
    shape of the same execution, so a late step is never lost.
    """
    if span is None or not sinks.spans:
        return
    try:
        if span.is_recording():
            span.add_event(event, span_attributes(attrs), timestamp=ts_ns)
            return
        context = span.get_span_context()
        if not context.is_valid:
            return
        parent = trace.set_span_in_context(trace.NonRecordingSpan(context))
        step = sinks.tracer().start_span(
            event,
            context=parent,
            attributes={**span_attributes({**fields, **attrs}), "job.event": event},
            start_time=ts_ns,
        )
        step.end(end_time=ts_ns)
    except Exception:
        _log.exception("dupescope: could not add span event %s", event)


def point_event(
    sinks: Sinks, event: str, fields: Mapping[str, Any], span: Span | None = None
) -> None:
    """An event outside an execution (enqueue, worker_start...): a zero-length span.

    Given `span` (say, the publish span of a messaging instrumentation), the event is
    written onto it instead: one publish, one span, one `enqueue`.
    """
    ts = time.time_ns()
    own: Span | None = None
    if sinks.spans:
        attrs = {**span_attributes(fields), "job.event": event}
        try:
            if span is not None and span.is_recording():
                span.set_attributes(attrs)
            else:
                own = sinks.tracer().start_span(event, attributes=attrs, start_time=ts)
                own.end(end_time=ts)
        except Exception:
            _log.exception("dupescope: could not record %s as a span", event)
    emit_log(sinks, ts, event, {**fields, **trace_ids(own or span)})
