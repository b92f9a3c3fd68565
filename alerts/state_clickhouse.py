"""Alert state in ClickHouse or chDB: `alerts`, `alert_outbox` and `alert_meta` tables.

ClickHouse has no multi-table transaction, so the order of inserts carries the guarantee:
outbox rows (each holding the alert document) are written before the alert itself. A
process killed in between finds the alert unknown on restart, writes the same outbox rows
again (same key, replaced) and then the alert: the delivery is owed exactly once.
Updates are new row versions of a ReplacingMergeTree, read with FINAL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from alerts.model import Alert, document
from alerts.state_base import Delivery, alert_params, history_frame
from store.base import Store
from store.sql_files import read

_SQL = Path(__file__).parent / "sql"
_SCHEMA = ("alerts_create", "outbox_create", "meta_create")


def _sql(name: str) -> str:
    return read(_SQL, name, "clickhouse")


def _naive_utc(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None)


class TableState:
    """AlertState in the store's own ClickHouse database (or chDB session)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        for name in _SCHEMA:
            self._command(_sql(name))

    def _command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.store.command(sql, params)

    def _outbox(self, delivery_key: tuple[str, str], document_text: str, **row: Any) -> None:
        alert_id, sink = delivery_key
        self._command(
            _sql("outbox_write"),
            {
                "alert_id": alert_id,
                "sink": sink,
                "document": document_text,
                "version": time.time_ns(),
                **row,
            },
        )

    def _known(self, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        frame = self.store.execute(_sql("known_alerts"), {"ids": ids})
        return set(frame["id"])

    def record(self, alerts: list[Alert], sinks: list[str], now: datetime) -> list[Alert]:
        known = self._known([a.id for a in alerts])
        new = [a for a in alerts if a.id not in known]
        stamp = _naive_utc(now)
        for alert in new:
            text = orjson.dumps(document(alert)).decode()
            for sink in sinks:
                self._outbox(
                    (alert.id, sink),
                    text,
                    status="pending",
                    attempts=0,
                    next_attempt_at=stamp,
                    last_error=None,
                    updated_at=stamp,
                )
            self._command(_sql("alert_insert"), alert_params(alert, text, stamp, _naive_utc))
        return new

    def due(self, now: datetime, sinks: Sequence[str], limit: int = 100) -> list[Delivery]:
        frame = self.store.execute(
            _sql("due"), {"now": _naive_utc(now), "sinks": list(sinks), "limit": limit})
        return [
            Delivery(r["alert_id"], r["sink"], int(r["attempts"]), orjson.loads(r["document"]))
            for r in frame.to_dict(orient="records")
        ]

    def _write(
        self,
        delivery: Delivery,
        *,
        status: str,
        attempts: int,
        next_at: datetime,
        error: str | None,
        now: datetime,
    ) -> None:
        self._outbox(
            (delivery.alert_id, delivery.sink),
            orjson.dumps(delivery.document).decode(),
            status=status,
            attempts=attempts,
            next_attempt_at=_naive_utc(next_at),
            last_error=error,
            updated_at=_naive_utc(now),
        )

    def delivered(self, delivery: Delivery, attempts: int, now: datetime) -> None:
        self._write(
            delivery, status="delivered", attempts=attempts, next_at=now, error=None, now=now
        )

    def retry_later(
        self, delivery: Delivery, attempts: int, next_at: datetime, error: str, now: datetime
    ) -> None:
        self._write(
            delivery, status="pending", attempts=attempts, next_at=next_at, error=error, now=now
        )

    def give_up(self, delivery: Delivery, attempts: int, error: str, now: datetime) -> None:
        self._write(delivery, status="failed", attempts=attempts, next_at=now, error=error, now=now)

    def pending_sinks(self) -> list[str]:
        return [str(s) for s in self.store.execute(_sql("pending_sinks"))["sink"]]

    def pending_count(self) -> int:
        frame = self.store.execute(_sql("pending_count"))
        return int(frame["n"].iloc[0])

    def watermark(self) -> datetime | None:
        frame = self.store.execute(_sql("watermark"))
        if frame.empty:
            return None
        return datetime.fromisoformat(frame["value"].iloc[0]).astimezone(UTC)

    def set_watermark(self, value: datetime) -> None:
        self._command(
            _sql("watermark_set"),
            {"value": value.astimezone(UTC).isoformat(), "version": time.time_ns()},
        )

    def history(self, limit: int = 200) -> pd.DataFrame:
        frame = self.store.execute(_sql("history"), {"limit": limit})
        return history_frame(
            [
                {
                    **orjson.loads(r["document"]),
                    "detected_at": r["detected_at"],
                    "deliveries_sent": int(r["sent"]),
                    "deliveries_pending": int(r["pending"]),
                    "deliveries_failed": int(r["failed"]),
                    "last_error": r["last_error"],
                }
                for r in frame.to_dict(orient="records")
            ]
        )

    def close(self) -> None:
        """The store owns the connection."""
