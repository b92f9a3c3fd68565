"""Alert state for the embedded store: one SQLite file under `<store>/alerts/`.

SQLite rather than another DuckDB file or Parquet segments: each detection must commit an
alert and its outbox rows atomically and durably (a few rows, often), and the dashboard
reads history from another process while `watch` writes, which a DuckDB file refuses and
which SQLite in WAL mode allows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pandas as pd

from alerts.model import Alert, document
from alerts.state_base import Delivery, alert_params, history_frame
from store.sql_files import read

_SQL = Path(__file__).parent / "sql"
_SCHEMA = ("alerts_create", "outbox_create", "outbox_due_index", "meta_create")


def _sql(name: str) -> str:
    return read(_SQL, name, "sqlite")


def _text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class SqliteState:
    """AlertState in one SQLite file (WAL, synchronous=FULL: a commit survives SIGKILL)."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if readonly:
            uri = f"file:{self.path}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            self.path, isolation_level=None, timeout=30, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        for name in _SCHEMA:
            self._db.execute(_sql(name))

    def record(self, alerts: list[Alert], sinks: list[str], now: datetime) -> list[Alert]:
        new: list[Alert] = []
        stamp = _text(now)
        with self._lock:
            # IMMEDIATE: a second `watch` on the same store waits instead of racing us.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for alert in alerts:
                    text = orjson.dumps(document(alert)).decode()
                    inserted = self._db.execute(
                        _sql("alert_insert"), alert_params(alert, text, stamp, _text)
                    ).rowcount
                    if not inserted:
                        continue
                    new.append(alert)
                    self._db.executemany(
                        _sql("outbox_insert"),
                        [{"alert_id": alert.id, "sink": sink, "now": stamp} for sink in sinks],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return new

    def due(self, now: datetime, sinks: Sequence[str], limit: int = 100) -> list[Delivery]:
        params = {"now": _text(now), "sinks": orjson.dumps(list(sinks)).decode(), "limit": limit}
        with self._lock:
            rows = self._db.execute(_sql("due"), params).fetchall()
        return [Delivery(r[0], r[1], r[2], orjson.loads(r[3])) for r in rows]

    def pending_sinks(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute(_sql("pending_sinks")).fetchall()]

    def _update(
        self,
        delivery: Delivery,
        *,
        attempts: int,
        last_error: str | None,
        updated_at: str,
        status: str | None = None,
        next_attempt_at: str | None = None,
    ) -> None:
        """A delivery's outcome; a status or next attempt left None stays as it was."""
        with self._lock:
            self._db.execute(
                _sql("outbox_update"),
                {
                    "alert_id": delivery.alert_id,
                    "sink": delivery.sink,
                    "status": status,
                    "attempts": attempts,
                    "next_attempt_at": next_attempt_at,
                    "last_error": last_error,
                    "updated_at": updated_at,
                },
            )

    def delivered(self, delivery: Delivery, attempts: int, now: datetime) -> None:
        self._update(
            delivery, status="delivered", attempts=attempts, last_error=None, updated_at=_text(now)
        )

    def retry_later(
        self, delivery: Delivery, attempts: int, next_at: datetime, error: str, now: datetime
    ) -> None:
        self._update(
            delivery,
            attempts=attempts,
            next_attempt_at=_text(next_at),
            last_error=error,
            updated_at=_text(now),
        )

    def give_up(self, delivery: Delivery, attempts: int, error: str, now: datetime) -> None:
        self._update(
            delivery, status="failed", attempts=attempts, last_error=error, updated_at=_text(now)
        )

    def pending_count(self) -> int:
        with self._lock:
            return self._db.execute(_sql("pending_count")).fetchone()[0]

    def watermark(self) -> datetime | None:
        with self._lock:
            row = self._db.execute(_sql("watermark")).fetchone()
        return _parse(row[0]) if row else None

    def set_watermark(self, value: datetime) -> None:
        with self._lock:
            self._db.execute(_sql("watermark_set"), {"value": _text(value)})

    def history(self, limit: int = 200) -> pd.DataFrame:
        with self._lock:
            rows = self._db.execute(_sql("history"), {"limit": limit}).fetchall()
        return history_frame(
            [
                {
                    **orjson.loads(doc),
                    "detected_at": detected,
                    "deliveries_sent": sent,
                    "deliveries_pending": pending,
                    "deliveries_failed": failed,
                    "last_error": error,
                }
                for doc, detected, sent, pending, failed, error in rows
            ]
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()
