"""One execution of a job's body: `deliver` at the start, the steps, then `ack`/`nack`/`fail`.

The execution is one span (its start is the `deliver`), and every step is a span event
named by its kind: the shape the collector reads as one execution. Given a span that
already exists (a Celery or other messaging instrumentation's processing span), the
execution is written onto it instead of opening a second one.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from dupescope.instrument.emit import add_span_event, emit_log, trace_ids
from dupescope.instrument.fields import span_attributes
from dupescope.instrument.sinks import Sinks, current

_log = logging.getLogger(__name__)
_current_run: ContextVar[JobRun | None] = ContextVar("dupescope_job_run", default=None)

Settle = Literal["ack", "nack", "fail"]
#: What an exception leaving the body means: a settle kind, None for nothing, or a
#: function of the exception choosing one (say, `nack` for errors that will be retried).
OnException = Settle | None | Callable[[BaseException], Settle | None]


def current_run() -> JobRun | None:
    """The execution running in this context, so code deep in a job can report its steps."""
    return _current_run.get()


def reason_of(exc: BaseException) -> str:
    """`Type: message`, the `reason` of a `nack`/`fail` caused by an exception."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class JobRun:
    """The handle for the steps of one execution. Every method emits one contract event."""

    def __init__(self, sinks: Sinks, fields: dict[str, Any], span: Span | None) -> None:
        self.sinks = sinks
        self.fields = fields
        self.span = span
        #: The settle kind emitted so far (`ack`, `nack`, `fail`), or None.
        self.settled: Settle | None = None
        self._lock: tuple[str | None, str | None] = (None, None)

    def emit(self, event: str, **attrs: Any) -> None:
        """Emit any contract event of this execution, with extra attributes."""
        ts = time.time_ns()
        add_span_event(self.sinks, self.span, ts, event, attrs, self.fields)
        emit_log(self.sinks, ts, event, {**self.fields, **attrs, **trace_ids(self.span)})

    # Locks. The key and owner default to the last lock acquired, the common case of one
    # lock per execution.
    def _lock_fields(self, lock_key: str | None, owner: str | None) -> dict[str, Any]:
        return {"lock_key": lock_key or self._lock[0], "lock_owner": owner or self._lock[1]}

    def lock_acquired(self, lock_key: str, owner: str, ttl_ms: int, **attrs: Any) -> None:
        self._lock = (lock_key, owner)
        self.emit("lock_acquire", lock_key=lock_key, lock_owner=owner, lock_ttl_ms=ttl_ms, **attrs)

    def lock_renewed(
        self, ttl_ms: int, *, lock_key: str | None = None, owner: str | None = None, **attrs: Any
    ) -> None:
        """The TTL counts from now: the lock is valid until now + ttl_ms."""
        self.emit("lock_renew", **self._lock_fields(lock_key, owner), lock_ttl_ms=ttl_ms, **attrs)

    def lock_released(
        self,
        released: bool = True,
        *,
        lock_key: str | None = None,
        owner: str | None = None,
        **attrs: Any,
    ) -> None:
        """`released=False` when the compare-and-delete found another owner's token."""
        self.emit("lock_release", **self._lock_fields(lock_key, owner), released=released, **attrs)

    def lock_contended(
        self, lock_key: str, wait_ms: int | None = None, *, owner: str | None = None, **attrs: Any
    ) -> None:
        """The lock was held by another owner; `owner` is this execution's token, if any."""
        self.emit("lock_contended", lock_key=lock_key, lock_owner=owner, wait_ms=wait_ms, **attrs)

    def lock_expired(
        self, *, lock_key: str | None = None, owner: str | None = None, **attrs: Any
    ) -> None:
        self.emit("lock_expired", **self._lock_fields(lock_key, owner), **attrs)

    # The effect and its guards.
    def idempotency_hit(self, **attrs: Any) -> None:
        """The idempotency record said completed: the effect was skipped."""
        self.emit("idempotency_hit", **attrs)

    def side_effect(self, **attrs: Any) -> None:
        """The business effect ran (invoice created, card charged, mail sent)."""
        self.emit("side_effect", **attrs)

    def occ_conflict(self, **attrs: Any) -> None:
        """An optimistic-concurrency update matched no row."""
        self.emit("occ_conflict", **attrs)

    def commit(self, **attrs: Any) -> None:
        self.emit("commit", **attrs)

    # Settling the message.
    def ack(self, **attrs: Any) -> None:
        self.settled = "ack"
        self.emit("ack", **attrs)

    def nack(self, reason: str, *, settled_by: str | None = None, **attrs: Any) -> None:
        """Returned or retried with delay; `settled_by` names another process that did it."""
        self.settled = "nack"
        self.emit("nack", reason=reason, settled_by=settled_by, **attrs)

    def fail(self, reason: str, **attrs: Any) -> None:
        """Terminal failure: dead-lettered or given up."""
        self.settled = "fail"
        self.emit("fail", reason=reason, **attrs)


class job_execution:  # noqa: N801 - used like a function: `with job_execution(...) as run`
    """Context manager around one execution of a job's body.

    Entering emits `deliver` (the start of the execution span) and yields a `JobRun` for
    the steps. Leaving emits, unless the body settled the message itself: `ack` when the
    body returned (if `ack_on_success`), and on an exception the kind `on_exception`
    chooses (default `fail`), with the exception as `reason`. The exception propagates.

    `delivery_attempt` is the queue's delivery count for this job_id (1 for the first
    delivery); the duplicate analysis rests on it, so pass it whenever the queue tells.
    `span` is an existing processing span to write onto instead of starting one.
    Extra keyword arguments become attributes of the execution.
    """

    def __init__(
        self,
        job_id: str,
        job_type: str,
        *,
        idempotency_key: str | None = None,
        delivery_attempt: int | None = None,
        queue: str | None = None,
        visibility_timeout_ms: int | None = None,
        resource_key: str | None = None,
        worker_id: str | None = None,
        span: Span | None = None,
        span_name: str | None = None,
        sinks: Sinks | None = None,
        on_exception: OnException = "fail",
        ack_on_success: bool = True,
        **attrs: Any,
    ) -> None:
        self.sinks = current(sinks)
        self.fields: dict[str, Any] = {
            "job_id": job_id,
            "job_type": job_type,
            "idempotency_key": idempotency_key,
            "resource_key": resource_key,
            "queue": queue,
            "delivery_attempt": delivery_attempt,
            "visibility_timeout_ms": visibility_timeout_ms,
            "worker_id": worker_id or self.sinks.current_worker_id(),
            **attrs,
        }
        self.fields = {k: v for k, v in self.fields.items() if v is not None}
        self.span = span
        self.span_name = span_name or f"{job_type} process"
        self.on_exception = on_exception
        self.ack_on_success = ack_on_success
        self.run: JobRun | None = None
        self._owns_span = False
        self._activation: Any = None
        self._token: Token[JobRun | None] | None = None

    def __enter__(self) -> JobRun:
        self.run = self.start()
        self._token = _current_run.set(self.run)
        return self.run

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current_run.reset(self._token)
            self._token = None
        self.finish(exc)

    def start(self) -> JobRun:
        """Emit `deliver`; for callers (signal handlers) that cannot use `with`."""
        ts = time.time_ns()
        attrs = {**span_attributes(self.fields), "job.event": "deliver"}
        if self.sinks.spans:
            try:
                if self.span is not None:
                    if self.span.is_recording():
                        self.span.set_attributes(attrs)
                else:
                    self.span = self.sinks.tracer().start_span(
                        self.span_name, kind=SpanKind.CONSUMER, attributes=attrs, start_time=ts
                    )
                    self._owns_span = True
                    self._activation = trace.use_span(self.span, end_on_exit=False)
                    self._activation.__enter__()
            except Exception:
                _log.exception("dupescope: could not start the execution span")
        self.run = JobRun(self.sinks, self.fields, self.span)
        emit_log(self.sinks, ts, "deliver", {**self.fields, **trace_ids(self.span)})
        return self.run

    def finish(self, exc: BaseException | None = None) -> None:
        """Emit the settle the body did not, and end the span this execution started."""
        run = self.run
        if run is None:
            return
        if exc is not None:
            self._settle_exception(run, exc)
        elif run.settled is None and self.ack_on_success:
            run.ack()
        if self._owns_span and self.span is not None:
            try:
                if self._activation is not None:
                    self._activation.__exit__(None, None, None)
                self.span.end()
            except Exception:
                _log.exception("dupescope: could not end the execution span")
            self._owns_span = False

    def _settle_exception(self, run: JobRun, exc: BaseException) -> None:
        if self._owns_span and self.span is not None and self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, reason_of(exc)))
        if run.settled is not None:
            return
        kind = self.on_exception(exc) if callable(self.on_exception) else self.on_exception
        if kind == "fail":
            run.fail(reason_of(exc))
        elif kind == "nack":
            run.nack(reason_of(exc))
        elif kind == "ack":
            run.ack()


P = ParamSpec("P")
R = TypeVar("R")


def job(
    job_type: str | None = None,
    *,
    fields: Callable[..., Mapping[str, Any]],
    **options: Any,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator form: `fields(*args, **kwargs)` gives the call's job_id, key, attempt...

    Inside the function, `current_run()` is the execution, for its steps.
    """

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        name = job_type or f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            given = dict(fields(*args, **kwargs))
            with job_execution(job_type=given.pop("job_type", name), **given, **options):
                return function(*args, **kwargs)

        return run

    return wrap
