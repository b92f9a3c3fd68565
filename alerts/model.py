"""An alert: one incident found by one rule, with the evidence a person needs to act."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

# The row contract of `dupescope alerts` (DESIGN.md), then what alerting adds.
CONTRACT_COLUMNS: tuple[str, ...] = (
    "rule",
    "key",
    "job_id",
    "delivery_attempt",
    "lock_key",
    "lock_owner",
    "expired_at",
    "execution_end",
    "overrun_ms",
    "overlapped_by",
)
COLUMNS: tuple[str, ...] = (
    *CONTRACT_COLUMNS,
    # Where and when: the worker, and for a write or an overlap the event and its time.
    "worker_id",
    "job_type",
    "event",
    "ts",
    "severity",
    "summary",
    "alert_id",
    "incident_ts",
)


@dataclass
class Alert:
    """An incident. `id` depends only on the rule and the incident's identity."""

    id: str
    rule: str
    severity: str
    summary: str
    key: str | None = None
    job_type: str | None = None
    job_id: str | None = None
    delivery_attempt: int | None = None
    lock_key: str | None = None
    lock_owner: str | None = None
    expired_at: datetime | None = None
    execution_end: datetime | None = None
    overrun_ms: float | None = None
    overlapped_by: str | None = None
    worker_id: str | None = None
    event: str | None = None
    ts: datetime | None = None
    # Event time of the incident (its last event): what the watermark window compares.
    incident_ts: datetime | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The flat row for `dupescope alerts` and the history table."""
        values = asdict(self)
        values["alert_id"] = values.pop("id")
        values.pop("evidence")
        return {name: values[name] for name in COLUMNS}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if hasattr(value, "isoformat"):  # pandas Timestamp and friends
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def document(alert: Alert) -> dict[str, Any]:
    """The alert as a JSON-ready dict (times RFC 3339 UTC): what the state store keeps and
    what delivery builds payloads from, so a restarted `watch` sends the same body."""
    values = {name: _plain(value) for name, value in alert.row().items()}
    values["evidence"] = _plain(alert.evidence)
    return values
