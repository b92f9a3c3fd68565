"""Instrumentation for workers and producers: the job-event contract from application code.

    from dupescope import instrument

    instrument.configure(logger="jobs")        # optional: JSON log lines as well as spans
    with instrument.job_execution(job_id=msg.id, job_type="mail.send",
                                  idempotency_key=key, delivery_attempt=msg.attempt) as run:
        run.side_effect(kind="email")

Events go out as OpenTelemetry spans and span events through the application's tracer
provider (and, if configured, as JSON lines through `logging`). This package depends on
opentelemetry-api/sdk and the standard library only; Celery is imported only by
`dupescope.instrument.celery`.
"""

from dupescope.instrument.job import JobRun, current_run, job, job_execution, reason_of
from dupescope.instrument.logging_sink import JsonLineFormatter
from dupescope.instrument.producer import (
    enqueue_deduped,
    enqueued,
    outbox_write,
    worker_started,
    worker_stopped,
)
from dupescope.instrument.sinks import Sinks, configure

__all__ = [
    "JobRun",
    "JsonLineFormatter",
    "Sinks",
    "configure",
    "current_run",
    "enqueue_deduped",
    "enqueued",
    "job",
    "job_execution",
    "outbox_write",
    "reason_of",
    "worker_started",
    "worker_stopped",
]
