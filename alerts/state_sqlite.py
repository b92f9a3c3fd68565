"""Alert state for the embedded store: one SQLite file under `<store>/alerts/`.

SQLite rather than another DuckDB file or Parquet segments: each detection must commit an
alert and its outbox rows atomically and durably (a few rows, often), and the dashboard
reads history from another process while `watch` writes, which a DuckDB file refuses and
which SQLite in WAL mode allows.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pandas as pd

from alerts.model import Alert, document
from alerts.state_base import Delivery, history_frame

_SCHEMA = """
CREATE TABLE IF NOT EXISTS alerts (
    id TEXT PRIMARY KEY,
    rule TEXT NOT NULL,
    severity TEXT NOT NULL,
    key TEXT,
    job_type TEXT,
    incident_ts TEXT,
    detected_at TEXT NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    alert_id TEXT NOT NULL REFERENCES alerts(id),
    sink TEXT NOT NULL,
    status TEXT NOT NULL,            -- pending, delivered, failed
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (alert_id, sink)
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_attempt_at);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


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
        self._db.executescript(_SCHEMA)

    def record(self, alerts: list[Alert], sinks: list[str], now: datetime) -> list[Alert]:
        new: list[Alert] = []
        stamp = _text(now)
        with self._lock:
            # IMMEDIATE: a second `watch` on the same store waits instead of racing us.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for alert in alerts:
                    inserted = self._db.execute(
                        "INSERT OR IGNORE INTO alerts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            alert.id,
                            alert.rule,
                            alert.severity,
                            alert.key,
                            alert.job_type,
                            _text(alert.incident_ts) if alert.incident_ts else None,
                            stamp,
                            orjson.dumps(document(alert)).decode(),
                        ),
                    ).rowcount
                    if not inserted:
                        continue
                    new.append(alert)
                    self._db.executemany(
                        "INSERT OR IGNORE INTO outbox "
                        "(alert_id, sink, status, attempts, next_attempt_at, updated_at) "
                        "VALUES (?, ?, 'pending', 0, ?, ?)",
                        [(alert.id, sink, stamp, stamp) for sink in sinks],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return new

    def due(self, now: datetime, limit: int = 100) -> list[Delivery]:
        with self._lock:
            rows = self._db.execute(
                "SELECT o.alert_id, o.sink, o.attempts, a.document FROM outbox AS o "
                "JOIN alerts AS a ON a.id = o.alert_id "
                "WHERE o.status = 'pending' AND o.next_attempt_at <= ? "
                "ORDER BY o.next_attempt_at, a.detected_at LIMIT ?",
                (_text(now), limit),
            ).fetchall()
        return [Delivery(r[0], r[1], r[2], orjson.loads(r[3])) for r in rows]

    def _update(self, delivery: Delivery, **values: object) -> None:
        assignments = ", ".join(f"{name} = ?" for name in values)
        with self._lock:
            self._db.execute(
                f"UPDATE outbox SET {assignments} WHERE alert_id = ? AND sink = ?",
                (*values.values(), delivery.alert_id, delivery.sink),
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
            return self._db.execute(
                "SELECT count(*) FROM outbox WHERE status = 'pending'"
            ).fetchone()[0]

    def watermark(self) -> datetime | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = 'watermark'").fetchone()
        return _parse(row[0]) if row else None

    def set_watermark(self, value: datetime) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO meta VALUES ('watermark', ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (_text(value),),
            )

    def history(self, limit: int = 200) -> pd.DataFrame:
        with self._lock:
            rows = self._db.execute(
                "SELECT a.document, a.detected_at, "
                "count(*) FILTER (WHERE o.status = 'delivered'), "
                "count(*) FILTER (WHERE o.status = 'pending'), "
                "count(*) FILTER (WHERE o.status = 'failed'), "
                "max(o.last_error) "
                "FROM alerts AS a LEFT JOIN outbox AS o ON o.alert_id = a.id "
                "GROUP BY a.id ORDER BY a.detected_at DESC, a.id LIMIT ?",
                (limit,),
            ).fetchall()
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
