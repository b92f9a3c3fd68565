"""Start the receivers a configuration asks for, and stop them in order on a signal.

Stop order: receivers first (no new batches), then tails and Celery event streams, then
the writer drains what
is queued, so a clean shutdown acknowledges nothing it has not written.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import ipaddress
import logging
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from collectors.celery_log import CeleryLogOptions
from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.service.collector import (
    DEFAULT_BODY_BUDGET,
    DEFAULT_MAX_BODY,
    DEFAULT_QUEUE_ROWS,
    Collector,
)
from collectors.service.compaction import Compactor
from collectors.service.grpc_receiver import GrpcReceiver
from collectors.service.http_receiver import (
    BODY_TIMEOUT,
    IDLE_TIMEOUT,
    READ_TIMEOUT,
    HttpReceiver,
)
from collectors.service.pipeline import RECENT_UIDS
from collectors.service.tail import Tailer
from collectors.service.tls import TlsFiles
from collectors.service.trim import MemoryTrimmer
from collectors.time_of_day import DayBasis
from store.base import Store

if TYPE_CHECKING:
    from collectors.service.bullmq_source import BullMQSource
    from collectors.service.celery_source import CeleryEventSource
    from collectors.service.firehose_source import FirehoseSource
    from collectors.service.rq_source import RqRedisSource

log = logging.getLogger("dupescope.collect")


@dataclass
class CollectConfig:
    """What `dupescope collect` was asked for; a port of None disables that receiver."""

    host: str = "127.0.0.1"
    http_port: int | None = 4318
    grpc_port: int | None = 4317
    tail: list[str] = field(default_factory=list)
    tail_format: str = "auto"  # auto, json-lines or celery-log
    celery: CeleryLogOptions | None = None  # what Celery logs do not say
    day: DayBasis | None = None  # the date of RQ's and arq's time-only lines (--date)
    #: Brokers whose Celery event stream to consume (redis://, amqp://).
    celery_brokers: list[str] = field(default_factory=list)
    celery_exchange: str = "celeryev"
    #: Keyword arguments of a task that hold its idempotency key, the first present wins.
    celery_key_kwargs: tuple[str, ...] = ()
    #: Redis servers whose BullMQ events streams to read, the queues' key prefix, and the
    #: queues to read (none: every queue found).
    bullmq_redis: list[str] = field(default_factory=list)
    bullmq_prefix: str = "bull"
    bullmq_queues: list[str] = field(default_factory=list)
    #: Redis databases whose RQ state to poll (redis://...), and how often (seconds).
    rq_redis: list[str] = field(default_factory=list)
    rq_interval: float = 0.1
    #: amqp:// URLs (one vhost each) whose Firehose tracer to consume.
    rabbitmq_firehoses: list[str] = field(default_factory=list)
    state: Path | None = None
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    queue_rows: int = DEFAULT_QUEUE_ROWS
    body_budget_bytes: int = DEFAULT_BODY_BUDGET
    recent_uids: int = RECENT_UIDS
    decode_workers: int = 0
    mapping: FieldMapping = DEFAULT_MAPPING
    compact_every: float = 60.0  # seconds; 0 turns background compaction off
    compact_min_segments: int = 16
    tls: TlsFiles | None = None  # both receivers speak TLS only
    http_read_timeout: float = READ_TIMEOUT  # seconds an HTTP request may send nothing
    http_body_timeout: float = BODY_TIMEOUT  # seconds an HTTP body may take to arrive
    http_idle_timeout: float = IDLE_TIMEOUT  # seconds a connection may wait for a request


def default_state_path(store: Store, store_url: str | None) -> Path:
    """Tail offsets live beside the data they describe: in the embedded store's folder."""
    segmented = store.segmented()
    if segmented is not None:
        return segmented.root / "tail-state.json"
    return Path(".dupescope-tail-state.json")


def exposure_warnings(config: CollectConfig) -> list[str]:
    """What an operator should hear about receivers that listen beyond this machine."""
    if config.http_port is None and config.grpc_port is None:
        return []
    try:
        loopback = ipaddress.ip_address(config.host).is_loopback
    except ValueError:  # a name
        loopback = config.host == "localhost"
    if loopback:
        return []
    warnings = []
    if config.token is None:
        warnings.append(f"listening on {config.host} without --token: anyone who reaches "
                        "the ports can write events")
    if config.tls is None:
        warnings.append(f"listening on {config.host} without --tls-cert: events (and any "
                        "token) cross the network in the clear")
    return warnings


class RunningCollector:
    """Everything `collect` started; `stop()` undoes it in order."""

    def __init__(self, store: Store, config: CollectConfig, store_url: str | None = None):
        self.tls = config.tls
        # Loaded before anything starts: a certificate and key that do not match stop the
        # collector here, whichever receivers are on.
        context = config.tls.server_context() if config.tls else None
        credentials = config.tls.grpc_credentials() if config.tls else None
        for warning in exposure_warnings(config):
            log.warning(warning)
        self.collector = Collector(
            store,
            mapping=config.mapping,
            queue_rows=config.queue_rows,
            recent_uids=config.recent_uids,
            max_body_bytes=config.max_body_bytes,
            body_budget=config.body_budget_bytes,
            decode_workers=config.decode_workers,
            token=config.token,
        )
        self.http = (
            HttpReceiver(
                self.collector, config.host, config.http_port, tls=context,
                read_timeout=config.http_read_timeout,
                body_timeout=config.http_body_timeout,
                idle_timeout=config.http_idle_timeout,
            ).start()
            if config.http_port is not None
            else None
        )
        self.grpc = (
            GrpcReceiver(
                self.collector, config.host, config.grpc_port, credentials=credentials
            ).start()
            if config.grpc_port is not None
            else None
        )
        segmented = store.segmented()
        self.compactor = (
            Compactor(segmented, config.compact_every, config.compact_min_segments).start()
            if config.compact_every > 0 and segmented is not None
            else None
        )
        self.tailer = None
        if config.tail:
            state = config.state or default_state_path(store, store_url)
            self.tailer = Tailer(
                self.collector, config.tail, state, fmt=config.tail_format, celery=config.celery,
                day=config.day,
            ).start()
        self.celery: list[CeleryEventSource] = []
        if config.celery_brokers:
            from collectors.service.celery_source import CeleryEventSource

            self.celery = [
                CeleryEventSource(self.collector, url, exchange=config.celery_exchange,
                                  key_kwargs=config.celery_key_kwargs).start()
                for url in config.celery_brokers
            ]
            self.collector.reports["celery"] = lambda: [s.health() for s in self.celery]
        self.bullmq: list[BullMQSource] = []
        if config.bullmq_redis:
            from collectors.service.bullmq_source import BullMQSource, stream_ids_path

            ids = stream_ids_path(config.state or default_state_path(store, store_url))
            self.bullmq = [
                BullMQSource(self.collector, url, ids, prefix=config.bullmq_prefix,
                             queues=config.bullmq_queues, mapping=config.mapping).start()
                for url in config.bullmq_redis
            ]
            self.collector.reports["bullmq"] = lambda: [s.health() for s in self.bullmq]
        self.rq: list[RqRedisSource] = []
        if config.rq_redis:
            from collectors.service.rq_source import RqRedisSource, rq_state_path

            folder = (config.state or default_state_path(store, store_url)).parent
            self.rq = [
                RqRedisSource(self.collector, url, rq_state_path(folder, url),
                              interval=config.rq_interval).start()
                for url in config.rq_redis
            ]
            self.collector.reports["rq"] = lambda: [s.health() for s in self.rq]
        self.firehoses: list[FirehoseSource] = []
        if config.rabbitmq_firehoses:
            from collectors.service.firehose_source import FirehoseSource

            self.firehoses = [FirehoseSource(self.collector, url).start()
                              for url in config.rabbitmq_firehoses]
            self.collector.reports["rabbitmq_firehose"] = lambda: [
                s.health() for s in self.firehoses
            ]

    def describe(self) -> str:
        parts = []
        if self.http:
            parts.append(f"http={self.http.host}:{self.http.port}")
        if self.grpc:
            parts.append(f"grpc={self.grpc.host}:{self.grpc.port}")
        if self.tls and (self.http or self.grpc):
            parts.append("tls=on")
        if self.tailer and self.tailer.paths:
            parts.append(f"tail={len(self.tailer.paths)} file(s)")
        if self.tailer and self.tailer.patterns:
            parts.append(f"tail-patterns={len(self.tailer.patterns)}")
        parts.extend(source.describe() for source in self.celery)
        parts.extend(source.describe() for source in self.bullmq)
        parts.extend(rq_source.describe() for rq_source in self.rq)
        parts.extend(source.describe() for source in self.firehoses)
        parts.append(f"store={self.collector.store.describe()}")
        return " ".join(parts)

    def stop(self) -> None:
        if self.http:
            self.http.stop()
        if self.grpc:
            self.grpc.stop()
        if self.tailer:
            self.tailer.stop()
        for source in self.celery:
            source.stop()
        for source in self.bullmq:
            source.stop()
        for rq_source in self.rq:
            rq_source.stop()
        for firehose in self.firehoses:
            firehose.stop()
        self.collector.close()
        if self.compactor:
            self.compactor.stop()


# glibc's malloc options (mallopt): thresholds in bytes, and the most arenas.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
#: Malloc arenas for the whole process: as many as bodies are decoded at once by default.
MALLOC_ARENAS = 4


def keep_freed_memory() -> None:
    """Keep the memory of one request's columns for the next (glibc only).

    Each request's columns are a few MB that glibc maps fresh and unmaps when the writer is
    done with them, so every request paid for faulting its pages in again: ~10% of the CPU
    with lifecycle steps (4 rows a span). Up to 8 MB a block now comes from the heap, and
    up to 128 MB of free heap is kept rather than given back; peak RSS stays bounded by the
    queue as before (measured at 2x overload: under 450 MB). Blocks past 8 MB are a large
    body's own (a 10 MB line, its copies) and are mapped and given back at once: kept in
    the heap (a 32 MB threshold), twelve 10 MB bodies at once peaked at 556-630 MB, and at
    489-519 MB so.
    """
    _mallopt((_M_MMAP_THRESHOLD, 8 << 20), (_M_TRIM_THRESHOLD, 128 << 20))


def _few_malloc_arenas() -> None:
    """At most MALLOC_ARENAS malloc arenas (glibc only; it allows 8 a core).

    Bodies are decoded on the threads that received them, one per connection, and what a
    decode frees stays in its thread's arena for that arena's next allocation. With an
    arena for every thread, each came to hold a decode's worth: peak RSS from 128
    clients at twice the sustainable rate was 397 MB, and 353 MB with four arenas, as
    many as bodies are decoded at once (317 MB when four threads of their own decoded
    them, and 5% fewer spans/s). Four arenas cost no measurable CPU (8 alternating runs).
    """
    _mallopt((_M_ARENA_MAX, MALLOC_ARENAS))


def _mallopt(*settings: tuple[int, int]) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        for option, value in settings:
            libc.mallopt(option, value)
    except (OSError, AttributeError):  # not glibc: its own defaults
        pass


def _arrow_on_malloc() -> None:
    """Arrow's allocations from the C library's malloc, not its default mimalloc.

    mimalloc keeps pages for each thread that allocated, and every connection has a
    thread of its own: at twice the sustainable rate from 128 clients, peak RSS was
    ~610 MB with mimalloc and ~390 MB with malloc.
    """
    pa.set_memory_pool(pa.system_memory_pool())


def serve(store: Store, config: CollectConfig, store_url: str | None = None) -> None:
    """Run until SIGINT/SIGTERM; prints one `listening` line that scripts can read."""
    running = RunningCollector(store, config, store_url)
    # What is alive now (modules, protobuf descriptors, the store) lives as long as the
    # process. Frozen, it is no longer traversed by every collection of the garbage the
    # requests leave: ~0.7 µs less CPU a span, 10-15% more spans/s.
    gc.freeze()
    keep_freed_memory()
    _few_malloc_arenas()
    _arrow_on_malloc()
    # Freed memory is kept for the next request, up to a mark: past it, given back.
    trimmer = MemoryTrimmer().start()
    print(f"dupescope collect listening {running.describe()}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    running.stop()
    trimmer.stop()
