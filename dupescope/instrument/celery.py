"""Celery: the job-event contract from Celery's signals, with no change to the tasks.

    from dupescope.instrument.celery import instrument_celery
    instrument_celery(app)      # in the worker, after the tracer provider is set

Each task run is one execution: `deliver` at `task_prerun` (with the delivery count, see
`deliveries`), `ack` at `task_success`, `nack` at `task_retry` (the retry's reason), `fail`
at `task_failure`; producers' publishes are `enqueue`s; each worker process says
`worker_start`. Where opentelemetry-instrumentation-celery is installed, its run and
publish spans carry these events (it is instrumented first, so that its spans exist when
these handlers look for them); without it, dupescope opens the execution spans itself.
Inside a task, `dupescope.instrument.current_run()` is the execution, for its steps.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from dupescope.instrument.deliveries import DeliveryCounter, default_counter, delivery_attempt
from dupescope.instrument.emit import point_event
from dupescope.instrument.job import job_execution, reason_of
from dupescope.instrument.producer import enqueued, worker_started, worker_stopped
from dupescope.instrument.sinks import Sinks, current

_log = logging.getLogger(__name__)

#: (task name, args, kwargs, headers or request) -> the idempotency key, or None.
KeyOf = Callable[[str, tuple[Any, ...], Mapping[str, Any], Any], str | None]
KEY_HEADER = "idempotency_key"
FINISHED_KEPT = 10_000


def key_from_message(
    task_name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], carrier: Any
) -> str | None:
    """The default key: an `idempotency_key` message header, else that keyword argument.

    Send it with `task.apply_async(kwargs, headers={"idempotency_key": key})`, or give the
    task an `idempotency_key` parameter.
    """
    if isinstance(carrier, Mapping):
        value = carrier.get(KEY_HEADER)
    else:
        value = getattr(carrier, KEY_HEADER, None)
        if value is None:
            value = (getattr(carrier, "headers", None) or {}).get(KEY_HEADER)
    if value is None:
        value = kwargs.get(KEY_HEADER) if isinstance(kwargs, Mapping) else None
    return None if value is None else str(value)


def _otel_instrumentor() -> Any | None:
    """opentelemetry-instrumentation-celery's (singleton) instrumentor, if installed."""
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
    except ImportError:
        return None
    return CeleryInstrumentor()


def _otel_run_span(task: Any, task_id: str) -> Span | None:
    """The instrumentation's span for this run, where it made one."""
    try:
        from opentelemetry.instrumentation.celery import utils
    except ImportError:
        return None
    found = utils.retrieve_context(task, task_id)
    return found[0] if found else None


class CeleryInstrumentation:
    """The connected signal handlers; `uninstrument()` disconnects them."""

    def __init__(
        self,
        app: Any,
        sinks: Sinks,
        counter: DeliveryCounter | None,
        key_of: KeyOf,
        service_version: str | None,
    ) -> None:
        self.app = app
        self.sinks = sinks
        self._counter = counter
        self.key_of = key_of
        self.service_version = service_version
        # Executions running in this process, by task id: the signals after prerun find
        # their execution here.
        self.running: dict[str, job_execution] = {}
        # Task ids whose execution ended in this process, so that a later task_failure for
        # one (Celery's main process reports a Reject there) is not taken for a lost one.
        self.finished: OrderedDict[str, None] = OrderedDict()
        self._warned_order = False

    @property
    def counter(self) -> DeliveryCounter:
        # Chosen at the first delivery, once the app's result backend is configured.
        if self._counter is None:
            self._counter = default_counter(self.app)
        return self._counter

    def connect(self) -> None:
        from celery import signals

        for signal, handler in self._handlers(signals):
            signal.connect(handler, weak=False)

    def uninstrument(self) -> None:
        from celery import signals

        for signal, handler in self._handlers(signals):
            signal.disconnect(handler)

    def _handlers(self, signals: Any) -> list[tuple[Any, Callable[..., None]]]:
        return [
            (signals.before_task_publish, self.on_publish),
            (signals.task_prerun, self.on_prerun),
            (signals.task_success, self.on_success),
            (signals.task_retry, self.on_retry),
            (signals.task_failure, self.on_failure),
            (signals.task_postrun, self.on_postrun),
            (signals.worker_process_init, self.on_process_start),
            (signals.worker_ready, self.on_process_start),
            (signals.worker_process_shutdown, self.on_process_stop),
        ]

    # Producer side.
    def on_publish(
        self,
        sender: Any = None,
        body: Any = None,
        routing_key: str | None = None,
        headers: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> None:
        headers = headers or {}
        task_id = headers.get("id") or (body.get("id") if isinstance(body, Mapping) else None)
        task_name = headers.get("task") or str(sender)
        if not task_id:
            return
        args, kwargs = _call_of(body)
        current_span = trace.get_current_span()
        # The instrumentation's publish span is current here: write the enqueue onto it.
        span = current_span if _is_publish_span(current_span, task_name) else None
        retries = int(headers.get("retries") or 0)
        enqueued(
            str(task_id),
            task_name,
            idempotency_key=self.key_of(task_name, args, kwargs, headers),
            queue=routing_key or None,
            span=span,
            sinks=self.sinks,
            retry=retries or None,
        )

    # Worker side.
    def on_prerun(self, task_id: str = "", task: Any = None, **_: Any) -> None:
        if task is None or not task_id:
            return
        request = task.request
        span = _otel_run_span(task, task_id)
        if span is None:
            self._check_order()
        execution = job_execution(
            job_id=task_id,
            job_type=task.name,
            idempotency_key=self.key_of(
                task.name, request.args or (), request.kwargs or {}, request
            ),
            delivery_attempt=delivery_attempt(request, self.counter.count(task_id)),
            queue=(request.delivery_info or {}).get("routing_key"),
            visibility_timeout_ms=self._visibility_timeout_ms(),
            span=span,
            span_name=f"run/{task.name}",
            sinks=self.sinks,
            on_exception=None,  # Celery's signals say how the run ended
            ack_on_success=False,
        )
        execution.__enter__()
        self.running[task_id] = execution

    def on_success(self, sender: Any = None, **_: Any) -> None:
        execution = self.running.get(getattr(sender.request, "id", None) or "")
        if execution is not None and execution.run is not None:
            execution.run.ack(ack_mode="late" if sender.acks_late else "early")

    def on_retry(self, sender: Any = None, request: Any = None, reason: Any = None, **_: Any):
        task_id = getattr(request, "id", None) or ""
        execution = self.running.get(task_id)
        if execution is not None and execution.run is not None:
            execution.run.nack(_retry_reason(reason))

    def on_failure(
        self,
        sender: Any = None,
        task_id: str = "",
        exception: BaseException | None = None,
        **_: Any,
    ) -> None:
        reason = reason_of(exception) if exception is not None else "failed"
        execution = self.running.get(task_id)
        if execution is not None and execution.run is not None:
            execution.run.fail(reason)
            return
        if task_id in self.finished:
            return
        # No execution in this process: the main process settling for a pool process that
        # died or overran its hard time limit. `settled_by` says so, so the loss is not
        # taken for the execution's own verdict.
        request = getattr(sender, "request", None)
        attempt = None
        if request is not None and getattr(request, "id", None) == task_id:
            attempt = delivery_attempt(request, self.counter.seen(task_id))
        fields = {
            "job_id": task_id,
            "job_type": getattr(sender, "name", None),
            "delivery_attempt": attempt,
            "reason": reason,
            "settled_by": self.sinks.current_worker_id(),
        }
        point_event(self.sinks, "fail", {k: v for k, v in fields.items() if v is not None})

    def on_postrun(
        self, task_id: str = "", state: str | None = None, retval: Any = None, **_: Any
    ) -> None:
        execution = self.running.pop(task_id, None)
        if execution is None:
            return
        run = execution.run
        if run is not None and run.settled is None:
            # The two endings no other signal reports: the task raised Reject or Ignore.
            if state == "REJECTED" and getattr(retval, "requeue", False):
                run.nack(reason_of(retval) if isinstance(retval, BaseException) else "Reject")
            elif state == "REJECTED":  # dropped, or dead-lettered by the broker
                run.fail(reason_of(retval) if isinstance(retval, BaseException) else "Reject")
            elif state == "IGNORED":  # Celery acknowledges the message
                run.ack(ignored=True)
        execution.__exit__(None, None, None)
        self.finished[task_id] = None
        if len(self.finished) > FINISHED_KEPT:
            self.finished.popitem(last=False)

    def on_process_start(self, **_: Any) -> None:
        worker_started(self.service_version, sinks=self.sinks)

    def on_process_stop(self, **_: Any) -> None:
        worker_stopped(sinks=self.sinks)

    def _visibility_timeout_ms(self) -> int | None:
        # Redis and SQS transports redeliver unacked messages after this many seconds.
        options = self.app.conf.broker_transport_options or {}
        seconds = options.get("visibility_timeout")
        return int(float(seconds) * 1000) if seconds is not None else None

    def _check_order(self) -> None:
        instrumentor = _otel_instrumentor()
        if instrumentor is not None and instrumentor.is_instrumented_by_opentelemetry:
            if not self._warned_order:
                _log.warning(
                    "dupescope: CeleryInstrumentor was instrumented after instrument_celery();"
                    " each run now has two spans. Instrument it first."
                )
                self._warned_order = True


def _retry_reason(reason: Any) -> str:
    """The error that caused a retry, rather than Celery's `Retry in 0s: ...` wrapper."""
    cause = getattr(reason, "exc", None)
    if isinstance(cause, BaseException):
        return reason_of(cause)
    return reason_of(reason) if isinstance(reason, BaseException) else str(reason)


def _call_of(body: Any) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """(args, kwargs) of a task message body (protocol 2: a tuple; protocol 1: a dict)."""
    if isinstance(body, list | tuple) and len(body) >= 2:
        return tuple(body[0] or ()), body[1] or {}
    if isinstance(body, Mapping):
        return tuple(body.get("args") or ()), body.get("kwargs") or {}
    return (), {}


def _is_publish_span(span: Span, task_name: str) -> bool:
    return span.is_recording() and getattr(span, "name", None) == f"apply_async/{task_name}"


def instrument_celery(
    app: Any = None,
    *,
    sinks: Sinks | None = None,
    counter: DeliveryCounter | None = None,
    idempotency_key: KeyOf = key_from_message,
    service_version: str | None = None,
    otel: bool = True,
) -> CeleryInstrumentation:
    """Connect dupescope to Celery's signals; call once per process, in worker and producer.

    counter: how redeliveries are counted (default: in the result backend where it can
        increment atomically, else per process; see `dupescope.instrument.deliveries`).
    idempotency_key: how a task's key is found (default: `key_from_message`).
    otel: instrument opentelemetry-instrumentation-celery first, when it is installed and
        not instrumented yet, so that its spans carry the events.
    """
    if app is None:
        from celery import current_app

        app = current_app
    chosen = current(sinks)
    if otel:
        instrumentor = _otel_instrumentor()
        if instrumentor is not None and not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=chosen.tracer_provider)
    instrumentation = CeleryInstrumentation(app, chosen, counter, idempotency_key, service_version)
    instrumentation.connect()
    return instrumentation
