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
import time
from collections.abc import Callable
from typing import Any

from collectors.normalise import RecordError
from collectors.rabbitmq_firehose import TRACE_EXCHANGE, FirehoseMapper
from collectors.service.broker_source import AckedBatch, AckingBrokerSource
from collectors.service.celery_source import default_queue_name
from collectors.service.collector import Collector

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


class FirehoseSource(AckingBrokerSource):
    """Consumes one vhost's Firehose until `stop()`."""

    label = "rabbitmq firehose"
    thread_name = "dupescope-rabbitmq-firehose"

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

        super().__init__(collector, AckedBatch(flush_seconds, flush_rows, PREFETCH))
        self.url = url
        self.shown_url = Connection(url).as_uri()
        # Named after the store and the vhost; not `amq.`-prefixed, which RabbitMQ keeps.
        self.queue_name = queue_name or default_queue_name(
            collector.store.describe(), url, "firehose"
        )
        self.flush_seconds = flush_seconds
        self.clock = clock
        self.mapper = FirehoseMapper(collector.decoder.normaliser)
        self.stats = {"messages": 0, "rows": 0, "malformed": 0, "connects": 0}

    def _session(self) -> None:
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
                self._connected()
                log.info("rabbitmq firehose: consuming %s (queue %s)", self.shown_url,
                         self.queue_name)
                while not self._stop.is_set():
                    caught_up = False
                    try:
                        conn.drain_events(timeout=self.flush_seconds)
                    except TimeoutError:
                        caught_up = True
                        conn.heartbeat_check()
                    if self.batch.due(caught_up, self.clock()):
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
        except Exception as exc:  # a shape not foreseen: refused, never a retry loop
            log.debug("rabbitmq firehose: mapping failed", exc_info=True)
            self._refuse(routing_key, f"{type(exc).__name__}: {exc}")
        else:
            if row is None:
                self.batch.ignored += 1
            else:
                self.batch.rows.append(row)
        self.batch.took(message, self.clock())

    def _refuse(self, routing_key: str, why: str) -> None:
        self.stats["malformed"] += 1
        self.batch.rejected += 1
        self._problems.warn("malformed", "rabbitmq firehose %s: trace message %r refused: %s",
                            self.shown_url, routing_key, why)

    def health(self) -> dict[str, Any]:
        return {**super().health(), "queue": self.queue_name}

    def describe(self) -> str:
        return f"rabbitmq-firehose={self.shown_url}"
