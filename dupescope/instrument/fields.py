"""The job-event contract's names, spelled for each sink.

Spans carry the canonical fields with a `job.` prefix (so they cannot collide with other
instrumentations' attributes); log lines carry them bare. Everything else (`reason`,
`released`, `wait_ms`, a side effect's own attributes) keeps its name on both, because the
collector keeps unknown keys in `attrs` under the name it received.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

# The contract's canonical fields that an emitter sets (trace_id/span_id come from the span).
CANONICAL: frozenset[str] = frozenset(
    {
        "job_id",
        "job_type",
        "idempotency_key",
        "resource_key",
        "queue",
        "delivery_attempt",
        "worker_id",
        "lock_key",
        "lock_owner",
        "lock_ttl_ms",
        "visibility_timeout_ms",
        "service_version",
    }
)

Primitive = str | bool | int | float
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def default_worker_id() -> str:
    """host:pid, read at each call: a forked pool child must not inherit its parent's id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _attribute_value(value: Any) -> Primitive:
    # OpenTelemetry attributes hold primitives only; anything richer travels as text.
    if isinstance(value, str | bool | int | float):
        return value
    return str(value)


def span_attributes(fields: Mapping[str, Any]) -> dict[str, Primitive]:
    """Fields as span (or span event) attributes: canonical names get the `job.` prefix."""
    return {
        (f"job.{name}" if name in CANONICAL else name): _attribute_value(value)
        for name, value in fields.items()
        if value is not None
    }


def rfc3339(ts_ns: int) -> str:
    """UTC with microseconds and a `Z`, the contract's timestamp for log lines."""
    # Integer arithmetic: a float of epoch seconds cannot hold every microsecond.
    moment = _EPOCH + timedelta(microseconds=ts_ns // 1_000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log_fields(ts_ns: int, event: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """One contract log line: `ts`, `event`, then the fields under their canonical names."""
    line: dict[str, Any] = {"ts": rfc3339(ts_ns), "event": event}
    line.update((name, value) for name, value in fields.items() if value is not None)
    return line
