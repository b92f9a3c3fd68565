"""Events outside an execution: the producer's side, and the worker process's lifecycle."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from dupescope.instrument.emit import point_event
from dupescope.instrument.sinks import Sinks, current


def _fields(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def enqueued(
    job_id: str,
    job_type: str,
    *,
    idempotency_key: str | None = None,
    queue: str | None = None,
    resource_key: str | None = None,
    span: Span | None = None,
    sinks: Sinks | None = None,
    **attrs: Any,
) -> None:
    """The job was published to the broker as `job_id` (the message id workers will see).

    A producer that retries a publish and gets a new message id each time shows up here
    as two `enqueue`s of one key: the `producer_retry` cause.
    """
    fields = _fields(
        job_id=job_id,
        job_type=job_type,
        idempotency_key=idempotency_key,
        queue=queue,
        resource_key=resource_key,
        **attrs,
    )
    point_event(current(sinks), "enqueue", fields, span)


def enqueue_deduped(
    job_type: str,
    idempotency_key: str,
    *,
    job_id: str | None = None,
    queue: str | None = None,
    span: Span | None = None,
    sinks: Sinks | None = None,
    **attrs: Any,
) -> None:
    """A dedupe table or unique-job check suppressed an enqueue of this key.

    `job_id` is the message already holding the key, when the check knows it.
    """
    fields = _fields(
        job_id=job_id, job_type=job_type, idempotency_key=idempotency_key, queue=queue, **attrs
    )
    point_event(current(sinks), "enqueue_deduped", fields, span)


def outbox_write(
    job_id: str,
    job_type: str,
    *,
    idempotency_key: str | None = None,
    queue: str | None = None,
    resource_key: str | None = None,
    sinks: Sinks | None = None,
    **attrs: Any,
) -> None:
    """The business change and its outbox row committed in one transaction.

    `job_id` is the id the outbox publisher will publish the message under.
    """
    fields = _fields(
        job_id=job_id,
        job_type=job_type,
        idempotency_key=idempotency_key,
        queue=queue,
        resource_key=resource_key,
        **attrs,
    )
    point_event(current(sinks), "outbox_write", fields)


def worker_started(
    service_version: str | None = None,
    *,
    worker_id: str | None = None,
    sinks: Sinks | None = None,
    **attrs: Any,
) -> None:
    """This process started taking jobs; the version lets crash loops be told apart."""
    chosen = current(sinks)
    fields = _fields(
        worker_id=worker_id or chosen.current_worker_id(), service_version=service_version, **attrs
    )
    point_event(chosen, "worker_start", fields)


def worker_stopped(
    *, worker_id: str | None = None, sinks: Sinks | None = None, **attrs: Any
) -> None:
    """This process stopped taking jobs (a clean shutdown: a crash emits nothing)."""
    chosen = current(sinks)
    point_event(
        chosen, "worker_stop", _fields(worker_id=worker_id or chosen.current_worker_id(), **attrs)
    )
