"""`--rabbitmq-firehose AMQP_URL`: consume RabbitMQ's Firehose tracer into the store.

One thread a broker. It declares a queue of its own in the URL's vhost, bound to the
trace exchange `amq.rabbitmq.trace` with `publish.#` (enqueues and retries) and `deliver.#`
(deliveries), maps each trace message (collectors/rabbitmq_firehose.py) and hands the rows
to the collector's group-commit writer in small batches, acknowledging the trace messages
only once their rows are durable, as the Celery event source does
(collectors/service/celery_source.py): a receiver killed at any point finds the
unacknowledged ones again in its durable queue, and they carry the same event_uids.

Tracing must be on in the vhost (`rabbitmqctl trace_on -p VHOST`); it is off after a
broker restart. The queue is named after the store and the broker, expires after
QUEUE_EXPIRES without a consumer and holds at most QUEUE_MAX_LENGTH messages, so a
collector that is gone for good does not leave the broker a growing copy of its traffic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from collectors.arrow_batch import rows_to_table
from collectors.normalise import RecordError, Row
from collectors.rabbitmq_firehose import TRACE_EXCHANGE, FirehoseMapper
from collectors.service.bodies import DecodeResult
from collectors.service.celery_source import Backoff, default_queue_name
from collectors.service.collector import Collector
from collectors.service.log_limit import SummarisedLog
from collectors.service.pipeline import QueueFull, WriteFailed

log = logging.getLogger("dupescope.collect")

INSTALL_HINT = "pip install 'dupescope[firehose]'"
FLUSH_SECONDS = 0.2
FLUSH_ROWS = 2_000
PREFETCH = 1_000
QUEUE_EXPIRES = 24 * 3600.0
QUEUE_MAX_LENGTH = 1_000_000
BINDINGS = ("publish.#", "deliver.#")


class FirehoseMissing(RuntimeError):
    """kombu (and its py-amqp transport) are not installed."""


def require_kombu() -> None:
    try:
        import amqp  # noqa: F401
        import kombu  # noqa: F401
    except ImportError as exc:
        raise FirehoseMissing(
            f"--rabbitmq-firehose needs kombu ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


def check_firehose_url(url: str) -> None:
    """ValueError unless `url` is an amqp:// URL; connects to nothing."""
    from kombu import Connection

    try:
        transport = Connection(url).transport_cls
    except Exception as exc:
        raise ValueError(f"--rabbitmq-firehose: not a broker URL ({exc})") from exc
    if transport not in ("amqp", "pyamqp", "amqps"):
        raise ValueError(f"--rabbitmq-firehose {url.split('@')[-1]}: an amqp:// URL is needed")


class FirehoseSource:
    """Consumes one vhost's Firehose until `stop()`."""

    def __init__(
        self,
        collector: Collector,
        url: str,
        *,
        queue_name: str | None = None,
        flush_seconds: float = FLUSH_SECONDS,
        flush_rows: int = FLUSH_ROWS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        require_kombu()
        from kombu import Connection

        self.collector = collector
        self.url = url
        self.shown_url = Connection(url).as_uri()
        # Named after the store and the vhost; not `amq.`-prefixed, which RabbitMQ keeps.
        self.queue_name = queue_name or default_queue_name(
            collector.store.describe(), url, "firehose"
        )
        self.flush_seconds = flush_seconds
        self.flush_rows = flush_rows
        self.clock = clock
        self.mapper = FirehoseMapper(collector.decoder.normaliser)
        self.backoff = Backoff()
        self.connected = threading.Event()
        self.stats = {"messages": 0, "rows": 0, "malformed": 0, "connects": 0}
        self._rows: list[Row] = []
        self._rejected = 0
        self._ignored = 0
        self._messages: list[Any] = []
        self._first_pending: float | None = None
        self._problems = SummarisedLog(log, every=30.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="dupescope-rabbitmq-firehose", daemon=True
        )

    def start(self) -> FirehoseSource:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._consume()
            except Exception as exc:  # the broker went away (or refused us): try again
                self.connected.clear()
                self._messages = []  # no longer acknowledgeable: the broker sends them again
                self._flush_quietly()
                if self._stop.is_set():
                    break
                delay = self.backoff.next()
                self._problems.warn(
                    "connection", "rabbitmq firehose %s: %s: %s; reconnecting in %.1f s",
                    self.shown_url, type(exc).__name__, exc, delay,
                )
                self._stop.wait(delay)
        self.connected.clear()

    def _consume(self) -> None:
        from kombu import Connection, Exchange, Queue, binding

        with Connection(self.url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
            trace = Exchange(TRACE_EXCHANGE, type="topic", durable=True, internal=True,
                             no_declare=True)
            queue = Queue(
                self.queue_name,
                bindings=[binding(trace, routing_key=key) for key in BINDINGS],
                durable=True,
                auto_delete=False,
                expires=QUEUE_EXPIRES,
                max_length=QUEUE_MAX_LENGTH,
            )
            consumer = conn.Consumer([queue], on_message=self._on_message, no_ack=False,
                                     prefetch_count=PREFETCH)
            with consumer:
                self.stats["connects"] += 1
                self.connected.set()
                self.backoff.reset()
                log.info("rabbitmq firehose: consuming %s (queue %s)", self.shown_url,
                         self.queue_name)
                while not self._stop.is_set():
                    caught_up = False
                    try:
                        conn.drain_events(timeout=self.flush_seconds)
                    except TimeoutError:
                        caught_up = True
                        conn.heartbeat_check()
                    if self._due(caught_up):
                        self._flush()
                self._flush()

    def _on_message(self, message: Any) -> None:
        self.stats["messages"] += 1
        routing_key = message.delivery_info.get("routing_key", "")
        try:
            row = self.mapper.map(routing_key, message.headers or {}, message.body,
                                  time.time_ns() // 1_000)
        except RecordError as exc:
            self._refuse(routing_key, str(exc))
            row = None
        except Exception as exc:  # a shape not foreseen: refused, never a retry loop
            log.debug("rabbitmq firehose: mapping failed", exc_info=True)
            self._refuse(routing_key, f"{type(exc).__name__}: {exc}")
            row = None
        else:
            if row is None:
                self._ignored += 1
        if row is not None:
            self._rows.append(row)
        self._messages.append(message)
        if self._first_pending is None:
            self._first_pending = self.clock()

    def _refuse(self, routing_key: str, why: str) -> None:
        self.stats["malformed"] += 1
        self._rejected += 1
        self._problems.warn("malformed", "rabbitmq firehose %s: trace message %r refused: %s",
                            self.shown_url, routing_key, why)

    def _due(self, caught_up: bool) -> bool:
        if not self._messages and not self._rows:
            return False
        if caught_up or len(self._rows) >= self.flush_rows or len(self._messages) >= PREFETCH // 2:
            return True
        return self._first_pending is not None and (
            self.clock() - self._first_pending >= self.flush_seconds
        )

    def _flush(self) -> None:
        """Make the pending rows durable (waiting while the store refuses them), then
        acknowledge their trace messages. Stopped before the store took them, the messages
        stay unacknowledged and the broker sends them again to the next receiver."""
        rows = self._rows
        if rows or self._rejected or self._ignored:
            backoff = Backoff(0.1, 5.0)
            while True:
                result = DecodeResult(rows_to_table(rows), rejected=self._rejected,
                                      ignored=self._ignored)
                try:
                    self.collector.commit(result)
                    break
                except (QueueFull, WriteFailed) as exc:
                    self._rejected = self._ignored = 0
                    if self._stop.is_set():
                        self._rows, self._messages = [], []
                        log.warning("rabbitmq firehose: stopping with %d rows not stored (%s)",
                                    len(rows), exc)
                        return
                    self._problems.warn("store", "rabbitmq firehose: %d rows wait for the "
                                        "store (%s)", len(rows), exc)
                    self._stop.wait(backoff.next())
            self.stats["rows"] += len(rows)
            self._rows, self._rejected, self._ignored = [], 0, 0
        messages, self._messages = self._messages, []
        self._first_pending = None
        for message in messages:
            if not message.acknowledged:
                message.ack()

    def _flush_quietly(self) -> None:
        try:
            self._flush()
        except Exception as exc:
            log.warning("rabbitmq firehose: %d rows not stored: %s", len(self._rows), exc)
            self._rows = []

    def health(self) -> dict[str, Any]:
        return {"broker": self.shown_url, "connected": self.connected.is_set(),
                "queue": self.queue_name, **self.stats}

    def describe(self) -> str:
        return f"rabbitmq-firehose={self.shown_url}"
