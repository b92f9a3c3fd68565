"""Field mapping: the contract's built-in aliases plus a user's TOML mapping file.

A mapping file names the user's fields for canonical ones and may rename event values:

    [fields]
    ts = "when"
    job_id = "task.uuid"          # nested objects are addressed with dots
    idempotency_key = ["order_id", "payment.key"]   # the first present wins

    [events]
    "task-received" = "deliver"
    "task-succeeded" = "ack"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

#: Where OTLP decoding puts the host:pid it builds from resource attributes.
RESOURCE_WORKER_ID = "resource.worker_id"
#: Where OTLP decoding puts the attempt a Celery run span implies from `celery.retries`
#: and the transport's `redelivered` flag (collectors/celery_spans.py).
CELERY_ATTEMPT = "celery.delivery_attempt"

# Canonical name -> source names tried in order (after the canonical name itself and its
# `job.`-prefixed form). From CONTRACT.md, "Aliases that work without a mapping file".
BUILTIN_ALIASES: dict[str, tuple[str, ...]] = {
    "ts": ("timestamp", "time", "@timestamp"),
    "event": ("job.event",),
    "job_id": ("messaging.message.id", "messaging.message_id"),
    "queue": ("messaging.destination.name", "messaging.destination"),
    "job_type": ("celery.task_name",),
    "delivery_attempt": (
        "messaging.gcp_pubsub.message.delivery_attempt",
        "messaging.servicebus.message.delivery_count",
        CELERY_ATTEMPT,
    ),
    # OpenTelemetry resource conventions, so a span needs no job-specific copy of them.
    "service_version": ("service.version",),
    # host:pid from the resource ranks below a worker_id the span or record names itself,
    # and above the SDK's per-process service.instance.id.
    "worker_id": (RESOURCE_WORKER_ID, "service.instance.id"),
}

# messaging.operation.type (older messaging.operation) -> event, where no event is named.
OPERATION_EVENTS: dict[str, str] = {
    "create": "enqueue",
    "send": "enqueue",
    "publish": "enqueue",
    "receive": "deliver",
    "process": "deliver",
    "deliver": "deliver",
    "settle": "ack",
}
OPERATION_KEYS: tuple[str, ...] = ("messaging.operation.type", "messaging.operation")
CELERY_RETRIES = "celery.retries"


class MappingError(ValueError):
    """A mapping file that cannot be used."""


@dataclass(frozen=True)
class FieldMapping:
    """Which source keys feed each canonical field, and how event names translate."""

    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)

    def sources_for(self, canonical: str) -> tuple[str, ...]:
        user = self.fields.get(canonical, ())
        return (*user, canonical, f"job.{canonical}", *BUILTIN_ALIASES.get(canonical, ()))

    @classmethod
    def load(cls, path: str | Path) -> FieldMapping:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise MappingError(f"{path}: {exc}") from exc
        fields: dict[str, tuple[str, ...]] = {}
        for canonical, names in data.get("fields", {}).items():
            if isinstance(names, str):
                names = [names]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise MappingError(
                    f"{path}: [fields] {canonical} must be a name or a list of names"
                )
            fields[canonical] = tuple(names)
        events = data.get("events", {})
        if not all(isinstance(v, str) for v in events.values()):
            raise MappingError(f"{path}: [events] values must be event names")
        return cls(fields=fields, events=dict(events))


DEFAULT_MAPPING = FieldMapping()
