"""`--celery-broker URL`: consume Celery's event stream, as Flower does, into the store.

One thread a broker. It binds a queue of its own to Celery's event exchange
(`celeryev`, every routing key), maps each event (collectors/celery_events.py) and hands
the rows to the collector's group-commit writer in small batches (every FLUSH_SECONDS or
FLUSH_ROWS), waiting until they are durable before it reads on.

How much survives the receiver's absence depends on the transport:

- **amqp:// (RabbitMQ).** The queue is durable and named after the store and the
  broker, so it outlives the receiver (RabbitMQ deletes it after QUEUE_EXPIRES unused,
  and keeps at most QUEUE_MAX_LENGTH messages): events sent while the collector is down
  or cut off wait there. Messages are
  acknowledged only once their rows are durable, so a receiver killed at any point
  finds the unacknowledged ones again; they carry the same event_uids, so a row is
  never counted twice.
- **redis://.** Kombu publishes events on Redis PUB/SUB, which keeps nothing for an
  absent subscriber: events sent while the receiver is away are gone. After a reconnect
  the tasks each worker held are forgotten (their settling may have been missed), so no
  task is reported lost on evidence that was never seen.

A lost connection is retried with exponential backoff
(collectors/service/broker_source.py); after each (re)connect the workers are asked for a
heartbeat, and their silence while the receiver was cut off does not count against them.
A malformed event is counted as rejected and logged (broker, event type, emitter, what is
wrong); its message's other events are kept.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from collectors.celery_events import CeleryEventMapper, events_of
from collectors.normalise import RecordError, content_uid
from collectors.service.broker_source import AckedBatch, AckingBrokerSource, Backoff
from collectors.service.collector import Collector

log = logging.getLogger("dupescope.collect")

INSTALL_HINT = "pip install 'dupescope[celery]'"
FLUSH_SECONDS = 0.2
FLUSH_ROWS = 2_000
#: Messages the broker may have in flight to the receiver, unacknowledged (amqp).
PREFETCH = 1_000
#: Seconds RabbitMQ keeps the receiver's queue without a consumer.
QUEUE_EXPIRES = 24 * 3600.0
#: Messages the queue holds for an absent receiver; beyond, RabbitMQ drops the oldest.
QUEUE_MAX_LENGTH = 1_000_000
EVENT_EXCHANGE = "celeryev"
#: A flush that took longer than this (seconds; a slow or failing store) leaves the
#: heartbeats unread meanwhile: no worker is judged silent for it.
STALL = 1.0
_ACCEPT = ["json"]


class CeleryMissing(RuntimeError):
    """Celery/kombu (or a transport's client) are not installed."""


def require_celery() -> None:
    """Raise CeleryMissing, naming the extra to install, unless celery and kombu import."""
    try:
        import celery  # noqa: F401
        import kombu  # noqa: F401
    except ImportError as exc:
        raise CeleryMissing(
            f"--celery-broker needs Celery and kombu ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


class BrokerUrlError(ValueError):
    """A --celery-broker URL no transport can take; the message says which and why."""


def check_broker_url(url: str) -> None:
    """Raise BrokerUrlError unless kombu has a transport for `url` whose client is
    installed (the redis client for redis://). Connects to nothing."""
    from kombu import Connection

    try:
        connection = Connection(url)
        shown = connection.as_uri()
    except Exception as exc:
        raise BrokerUrlError(f"--celery-broker: not a broker URL ({exc})") from exc
    try:
        connection.transport  # noqa: B018 - resolving it imports the transport's client
    except KeyError as exc:
        raise BrokerUrlError(f"--celery-broker {shown}: {exc.args[0]}") from exc
    except ImportError as exc:
        raise BrokerUrlError(f"--celery-broker {shown}: {exc} (or {INSTALL_HINT})") from exc


def default_queue_name(store_description: str, broker_url: str, exchange: str) -> str:
    """A queue name stable for one store and broker, so a restarted collector takes up
    the queue its predecessor left (amqp) and two collectors on different stores do not
    share one."""
    return f"{exchange}.dupescope-{content_uid(store_description, broker_url, exchange)[:16]}"


class CeleryEventSource(AckingBrokerSource):
    """Consumes one broker's event stream until `stop()`."""

    label = "celery events"
    thread_name = "dupescope-celery-events"

    def __init__(
        self,
        collector: Collector,
        broker_url: str,
        *,
        queue_name: str | None = None,
        exchange: str = EVENT_EXCHANGE,
        key_kwargs: tuple[str, ...] = (),
        flush_seconds: float = FLUSH_SECONDS,
        flush_rows: int = FLUSH_ROWS,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        require_celery()
        from kombu import Connection

        super().__init__(collector, AckedBatch(flush_seconds, flush_rows, PREFETCH), backoff)
        self.broker_url = broker_url
        self.shown_url = Connection(broker_url).as_uri()  # without the password
        self.exchange = exchange
        self.queue_name = queue_name or default_queue_name(
            collector.store.describe(), broker_url, exchange
        )
        self.flush_seconds = flush_seconds
        self.clock = clock
        self.mapper = CeleryEventMapper(key_kwargs=key_kwargs)
        self.stats = {"events": 0, "rows": 0, "malformed": 0, "connects": 0, "messages": 0}
        self._connection: Any = None

    # -- the loop ---------------------------------------------------------------------

    def _session(self) -> None:
        from kombu import Connection, Queue

        with Connection(self.broker_url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
            self._connection = conn
            from celery.events.event import get_exchange

            acknowledged = conn.transport.driver_type == "amqp"
            queue = Queue(
                self.queue_name,
                exchange=get_exchange(conn, name=self.exchange),
                routing_key="#",
                durable=acknowledged,
                auto_delete=not acknowledged,
                expires=QUEUE_EXPIRES if acknowledged else None,
                max_length=QUEUE_MAX_LENGTH if acknowledged else None,
            )
            consumer = conn.Consumer(
                [queue],
                callbacks=[self._on_message],
                no_ack=not acknowledged,
                accept=_ACCEPT,
                on_decode_error=self._on_decode_error,
                prefetch_count=PREFETCH if acknowledged else None,
            )
            with consumer:
                if self.stats["connects"] and not acknowledged:
                    self.mapper.forget_unsettled()  # PUB/SUB kept nothing for us meanwhile
                self.stats["connects"] += 1
                self.mapper.grace(self.clock())
                self._wake_workers(conn)
                # Redis PUB/SUB subscribes at the first poll, and keeps nothing published
                # before it: poll once before saying the stream is being read.
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=0.05)
                self._connected()
                log.info("celery events: consuming %s (queue %s)", self.shown_url,
                         self.queue_name)
                while not self._stop.is_set():
                    caught_up = False
                    try:
                        conn.drain_events(timeout=self.flush_seconds)
                    except TimeoutError:  # socket.timeout: nothing waiting
                        caught_up = True
                        conn.heartbeat_check()
                    self.batch.rows.extend(self.mapper.expire(self.clock(), caught_up))
                    if self.batch.due(caught_up, self.clock()):
                        self._flush()
                self._flush()

    def _wake_workers(self, conn: Any) -> None:
        """Ask every worker for a heartbeat now (as Flower does), so that liveness is
        known within a round trip instead of a heartbeat interval."""
        try:
            from celery import Celery

            app = Celery(broker=self.broker_url, set_as_current=False)
            app.control.broadcast("heartbeat", connection=conn)
        except Exception as exc:  # only a nicety: heartbeats come anyway
            log.debug("celery events: could not wake the workers: %s", exc)

    def _on_message(self, body: Any, message: Any) -> None:
        heard_at = self.clock()
        self.stats["messages"] += 1
        for index, event in enumerate(events_of(body)):
            self.stats["events"] += 1
            try:
                mapped = self.mapper.map(event, heard_at)
            except RecordError as exc:
                self._refuse(event, index, str(exc))
                continue
            except Exception as exc:  # a shape not foreseen: refused, never a retry loop
                log.debug("celery events: mapping failed", exc_info=True)
                self._refuse(event, index, f"{type(exc).__name__}: {exc}")
                continue
            if mapped.row is None:
                self.batch.ignored += 1
            self.batch.rows.extend(mapped.rows())
        self.batch.took(message, self.clock())

    def _on_decode_error(self, message: Any, exc: Exception) -> None:
        """A message that is not JSON (or not allowed): refused, acknowledged, not fatal."""
        self.stats["malformed"] += 1
        self.batch.rejected += 1
        self._problems.warn(
            "decode", "celery broker %s: a message could not be decoded (%s): %s",
            self.shown_url, message.content_type, exc,
        )
        self.batch.took(message, self.clock())

    def _refuse(self, event: Any, index: int, why: str) -> None:
        self.stats["malformed"] += 1
        self.batch.rejected += 1
        what = event.get("type") if isinstance(event, dict) else None
        sender = event.get("hostname") if isinstance(event, dict) else None
        self._problems.warn(
            "malformed", "celery broker %s: event %d of a message (type %r from %r) "
            "refused: %s", self.shown_url, index, what, sender, why,
        )

    def _flush(self) -> None:
        """As every acknowledging source does; a flush that stalled (a slow or failing
        store) left the heartbeats unread meanwhile, so no worker is judged silent for it."""
        started = self.clock()
        super()._flush()
        if self.clock() - started > STALL:
            self.mapper.grace(self.clock())

    def health(self) -> dict[str, Any]:
        """For /healthz: the broker (no password), whether it is connected now, counts."""
        return {**super().health(), "queue": self.queue_name}

    def describe(self) -> str:
        return f"celery={self.shown_url}"

    def close_connection(self) -> None:
        """Cut the broker connection under the loop, which then reconnects (to see it
        resume)."""
        conn = self._connection
        if conn is None:
            return
        for sock in _sockets_of(conn):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _sockets_of(conn: Any) -> list[Any]:
    """The sockets a kombu connection reads events from: py-amqp's one, or the Redis
    channels' (PUB/SUB and commands)."""
    found = []
    amqp_sock = getattr(getattr(conn, "connection", None), "sock", None)
    if amqp_sock is not None:
        found.append(amqp_sock)
    for channel in getattr(conn.connection, "channels", []) or []:
        for client in (getattr(channel, "subclient", None), getattr(channel, "client", None)):
            link = getattr(client, "connection", None)
            sock = getattr(link, "_sock", None)
            if sock is not None:
                found.append(sock)
    return found
