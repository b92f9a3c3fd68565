"""Where alerting remembers what it fired, what it still owes, and how far it has read.

Alerting runs on an at-least-once pipeline of its own (re-ingested batches, restarts,
webhook retries), so it keeps the same defences it looks for in jobs: an incident is
recorded under its stable id at most once, its deliveries are queued in an outbox in the
same transaction, and only then sent. A `watch` killed at any point resumes from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import pandas as pd

from alerts.model import Alert

HISTORY_COLUMNS: tuple[str, ...] = (
    "alert_id",
    "rule",
    "severity",
    "key",
    "job_type",
    "job_id",
    "delivery_attempt",
    "lock_key",
    "lock_owner",
    "overlapped_by",
    "overrun_ms",
    "summary",
    "incident_ts",
    "detected_at",
    "deliveries_sent",
    "deliveries_pending",
    "deliveries_failed",
    "last_error",
)


@dataclass(frozen=True)
class Delivery:
    """One owed delivery: an alert (as its stored document) to one sink."""

    alert_id: str
    sink: str
    attempts: int
    document: dict[str, Any]


def history_frame(rows: list[dict]) -> pd.DataFrame:
    """History rows -> a frame with HISTORY_COLUMNS and real timestamps."""
    frame = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
    for column in ("incident_ts", "detected_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame


def alert_params(
    alert: Alert, document: str, detected_at: Any, time: Callable[[datetime], Any]
) -> dict[str, Any]:
    """The parameters of `alert_insert` for one alert (its stored `document`), in each
    engine's own form of a time: `time` converts the incident's, `detected_at` is one."""
    return {
        "id": alert.id,
        "rule": alert.rule,
        "severity": alert.severity,
        "key": alert.key,
        "job_type": alert.job_type,
        "incident_ts": time(alert.incident_ts) if alert.incident_ts else None,
        "detected_at": detected_at,
        "document": document,
    }


class AlertState(Protocol):
    def record(self, alerts: list[Alert], sinks: list[str], now: datetime) -> list[Alert]:
        """Keep the alerts not seen before and queue one delivery per sink for each, in
        one durable step; returns the new ones (already-known ids are ignored)."""
        ...

    def due(self, now: datetime, sinks: Sequence[str], limit: int = 100) -> list[Delivery]:
        """Pending deliveries to `sinks` whose next attempt is due, oldest first."""
        ...

    def pending_sinks(self) -> list[str]:
        """The sinks deliveries are still owed to."""
        ...

    def delivered(self, delivery: Delivery, attempts: int, now: datetime) -> None: ...

    def retry_later(
        self, delivery: Delivery, attempts: int, next_at: datetime, error: str, now: datetime
    ) -> None: ...

    def give_up(self, delivery: Delivery, attempts: int, error: str, now: datetime) -> None: ...

    def pending_count(self) -> int: ...

    def watermark(self) -> datetime | None:
        """The newest event time evaluated so far (None before the first evaluation)."""
        ...

    def set_watermark(self, value: datetime) -> None: ...

    def history(self, limit: int = 200) -> pd.DataFrame:
        """Alerts fired, newest first, with delivery outcome (HISTORY_COLUMNS)."""
        ...

    def close(self) -> None: ...

