"""What every broker source of the collector shares: a thread that reconnects with
backoff, and a commit that waits while the store refuses rows.

A broker source (Celery's event stream, RabbitMQ's Firehose, RQ's Redis state, BullMQ's
events streams) reads one broker until `stop()`. Each subclass says how one connected
session reads (`_session`) and what it must forget when the connection is lost; this
module keeps the loop around it, the warnings (summarised, so a broker that is down for
an hour logs a line every half minute, not every retry) and the rule for the store: rows
are offered to the collector's group-commit writer until it takes them, and a source that
is being stopped meanwhile gives up without acknowledging or saving anything, so the next
start reads those rows again (with the same event_uids, kept once).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from collectors.arrow_batch import rows_to_table
from collectors.normalise import Row
from collectors.service.bodies import DecodeResult
from collectors.service.collector import Collector
from collectors.service.log_limit import SummarisedLog
from collectors.service.pipeline import QueueFull, WriteFailed
from store.durable import place, temporary_for

log = logging.getLogger("dupescope.collect")

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0


class Backoff:
    """Seconds to wait before the next reconnect: doubling up to a ceiling."""

    def __init__(self, first: float = BACKOFF_FIRST, ceiling: float = BACKOFF_MAX) -> None:
        self.first, self.ceiling = first, ceiling
        self.delay = first

    def next(self) -> float:
        delay, self.delay = self.delay, min(self.delay * 2, self.ceiling)
        return delay

    def reset(self) -> None:
        self.delay = self.first


def without_password(url: str) -> str:
    """The URL with its password replaced by `***`, for logs, /healthz and event uids."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def save_atomically(path: Path, data: bytes) -> None:
    """A source's resume state, written whole under a temporary name, fsynced and renamed:
    a crash leaves the old state or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_for(path)
    temporary.write_bytes(data)
    place(temporary, path)


class BrokerSource:
    """One broker read on a thread of its own until `stop()`, reconnecting with backoff.

    Subclasses set `label` (how logs name the source), `shown_url` and `stats` (with a
    `connects` count), and implement `_session`, which connects, sets `connected` and
    reads until `_stop` is set; any exception from it is a lost connection.
    """

    label = "broker"
    thread_name = "dupescope-broker"
    stats: dict[str, int]

    def __init__(self, collector: Collector, backoff: Backoff | None = None) -> None:
        self.collector = collector
        self.backoff = backoff or Backoff()
        self.connected = threading.Event()
        self.shown_url = ""
        self._problems = SummarisedLog(log, every=30.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def start(self) -> BrokerSource:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _session(self) -> None:
        raise NotImplementedError

    def _lost(self) -> None:
        """Called after a lost connection, before the wait: what the session held and can
        no longer finish (unacknowledgeable messages, rows to store anyway)."""

    def _connected(self) -> None:
        """A session is reading: say so, and start the next backoff from its floor."""
        self.connected.set()
        self.backoff.reset()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except Exception as exc:  # the broker went away (or refused us): try again
                self.connected.clear()
                self._lost()
                if self._stop.is_set():
                    break
                delay = self.backoff.next()
                self._problems.warn(
                    "connection", "%s %s: %s: %s; reconnecting in %.1f s",
                    self.label, self.shown_url, type(exc).__name__, exc, delay,
                )
                self._stop.wait(delay)
        self.connected.clear()

    def _commit(
        self, rows: list[Row], rejected: int = 0, ignored: int = 0,
        stop: threading.Event | None = None,
    ) -> bool:
        """Make `rows` durable, waiting while the store refuses them (QueueFull, a failed
        write). False, with nothing stored, when `stop` (the source's own stop by
        default) is set meanwhile. Rejected and ignored counts go with the first try."""
        stop = stop or self._stop
        backoff = Backoff(0.1, 5.0)
        while True:
            result = DecodeResult(rows_to_table(rows), rejected=rejected, ignored=ignored)
            try:
                self.collector.commit(result)
                return True
            except (QueueFull, WriteFailed) as exc:
                rejected = ignored = 0  # counted once, by the first try
                if stop.is_set():
                    log.warning("%s: stopping with %d rows not stored (%s)", self.label,
                                len(rows), exc)
                    return False
                self._problems.warn("store", "%s: %d rows wait for the store (%s)",
                                    self.label, len(rows), exc)
                stop.wait(backoff.next())

    def describe(self) -> str:
        return f"{self.label}={self.shown_url}"

    def health(self) -> dict[str, Any]:
        """For /healthz: the broker (no password), whether it is connected now, counts."""
        return {"broker": self.shown_url, "connected": self.connected.is_set(), **self.stats}


class AckedBatch:
    """Rows read from broker messages, and the messages, held until the rows are durable;
    then the messages are acknowledged. Flushed when the reader is caught up, holds
    `flush_rows` rows or half the prefetch window, or waited `flush_seconds`."""

    def __init__(self, flush_seconds: float, flush_rows: int, prefetch: int) -> None:
        self.flush_seconds, self.flush_rows, self.prefetch = flush_seconds, flush_rows, prefetch
        self.rows: list[Row] = []
        self.messages: list[Any] = []
        self.rejected = 0
        self.ignored = 0
        self.first_at: float | None = None

    def took(self, message: Any, now: float) -> None:
        """`message` was read (its rows, if any, already added)."""
        self.messages.append(message)
        if self.first_at is None:
            self.first_at = now

    def due(self, caught_up: bool, now: float) -> bool:
        if not self.messages and not self.rows:
            return False
        # Waiting on the broker's prefetch window would look like being caught up.
        if (caught_up or len(self.rows) >= self.flush_rows
                or len(self.messages) >= self.prefetch // 2):
            return True
        return self.first_at is not None and now - self.first_at >= self.flush_seconds

    def has_rows(self) -> bool:
        return bool(self.rows or self.rejected or self.ignored)

    def stored(self) -> int:
        """The rows were made durable: acknowledge their messages; the count of rows."""
        count = len(self.rows)
        messages = self.messages
        self.rows, self.messages, self.rejected, self.ignored = [], [], 0, 0
        self.first_at = None
        for message in messages:
            if not message.acknowledged:
                message.ack()
        return count

    def drop(self) -> None:
        """Forget everything held (stopping, or the connection lost): the broker sends the
        unacknowledged messages again."""
        self.rows, self.messages, self.rejected, self.ignored = [], [], 0, 0
        self.first_at = None


class AckingBrokerSource(BrokerSource):
    """A broker source whose messages are acknowledged once their rows are durable
    (AMQP consumers): stopped or cut off before, the broker sends them again."""

    def __init__(
        self, collector: Collector, batch: AckedBatch, backoff: Backoff | None = None
    ) -> None:
        super().__init__(collector, backoff)
        self.batch = batch

    def _flush(self) -> None:
        """Make the held rows durable (waiting while the store refuses them), then
        acknowledge their messages. Stopped before the store took them, the messages stay
        unacknowledged and the broker sends them again to the next receiver."""
        batch = self.batch
        if batch.has_rows():
            if not self._commit(batch.rows, batch.rejected, batch.ignored):
                batch.drop()
                return
        self.stats["rows"] += batch.stored()

    def _lost(self) -> None:
        """After a lost connection: store what was read (the broker sends it again anyway,
        with the same uids); its messages can no longer be acknowledged."""
        self.batch.messages = []
        try:
            self._flush()
        except Exception as exc:
            log.warning("%s: %d rows not stored: %s", self.label, len(self.batch.rows), exc)
            self.batch.drop()
