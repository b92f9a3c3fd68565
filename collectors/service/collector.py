"""The collector's core, shared by every receiver: admit, decode, queue, wait until durable.

Receivers (HTTP, gRPC, file tails) only translate their protocol; the rules live here:
refuse early when the queue is full (before spending CPU on a body that would be refused
anyway), bound the bytes of bodies held at once and how many are decoded at once (so memory
stays bounded however many clients connect), count everything, and return only once the
batch is durable.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.service.bodies import DecodeResult
from collectors.service.decoding import Decoder, DecoderUnavailable
from collectors.service.pipeline import RECENT_UIDS, Pipeline, QueueFull, WriteFailed
from store.base import Store

DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_QUEUE_ROWS = 200_000
# Bytes of bodies held at once, from before one is read until its rows are queued: 64
# bodies of 1000 spans. Many clients that send at the same moment wait, then get 429, before
# their bodies are read, instead of each growing the process by a body and its decoding.
DEFAULT_BODY_BUDGET = 32 * 1024 * 1024
ACK_TIMEOUT = 60.0
DECODE_WAIT = 1.0
# What decoding a body may hold at once, counted as a multiple of each body's size (its
# rows as Python objects, the columns, copies of its strings): measured peaks for 10 MB
# bodies were 6-20x the body where a body is decoded in Python (JSON lines, OTLP JSON, log
# records) and about 1x where the native decoder takes it (trace protobuf). Counted only
# by the body budget, three 10 MB JSON bodies decoding at once took the collector from
# ~190 MB to 0.6-1.1 GB. A share larger than the whole is taken alone, when nothing else is
# decoding: one large JSON body at a time.
DECODE_BUDGET = 64 * 1024 * 1024
PYTHON_DECODE_FACTOR = 16
NATIVE_DECODE_FACTOR = 2
# How long a body waits for room in the budget before its sender is answered 429. Refused
# at once, senders that retried soon sent their bodies again and again: from 128 clients
# retrying after 50 ms, 54-65% as many spans a second were taken (118-141k against 217k).
BUDGET_WAIT = 1.0
# How far below the writer the receiving threads, which decode, run (a nice value, Linux
# only). There are more decoders than cores, and every one of them waits for the writer's
# next commit: a writer that had to queue for a core behind them held them all up
# (measured: 12-22% more spans/s with it than without).
DECODER_NICE = 10
_lowered = threading.local()


def _yield_to_writer() -> None:
    """Lower this receiving thread's priority, once per thread (never the main thread's:
    a process embedding the collector keeps its own)."""
    if getattr(_lowered, "done", False) or threading.current_thread() is threading.main_thread():
        return
    _lowered.done = True
    if sys.platform.startswith("linux"):  # elsewhere the id would name a process
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), DECODER_NICE)
        except OSError:
            pass  # not allowed here: run at the same priority


class BodyBudget:
    """The bytes of request bodies the collector holds at once, counted from before a body
    is read until its rows are queued (the rows, once decoded, stand for it); a compressed
    body's share grows as it is decompressed. A share larger than the whole budget is
    taken when nothing else is held. Bodies waiting for room are served in the order they
    came: a large one is not passed, and so starved, by a steady flow of small ones that
    each fit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._room = threading.Condition(threading.Lock())
        self._line: deque[object] = deque()  # the bodies waiting for room, first first

    @property
    def waiting(self) -> int:
        """Bodies waiting for room now."""
        return len(self._line)

    def _fits(self, nbytes: int) -> bool:
        return not nbytes or not self.held or self.held + nbytes <= self.limit

    def take(self, nbytes: int, wait: float = 0.0, in_turn: bool = True) -> bool:
        """Whether `nbytes` more fit, within `wait` seconds (then they are held); nothing
        always fits. Waiting costs no memory where the body is not read yet (HTTP). A
        body already held that grows (`in_turn=False`) does not wait behind new ones: its
        sender is part way through sending it."""
        queued = bool(nbytes) and in_turn
        turn = object()
        with self._room:
            if queued:
                self._line.append(turn)
            try:
                taken = self._room.wait_for(
                    lambda: (not queued or self._line[0] is turn) and self._fits(nbytes),
                    timeout=wait,
                )
                if taken:
                    self.held += nbytes
                return taken
            finally:
                if queued:
                    self._line.remove(turn)
                    self._room.notify_all()  # the next in line may fit, or is first now

    def give(self, nbytes: int) -> None:
        with self._room:
            self.held -= nbytes
            self._room.notify_all()


class Admission:
    """A body's share of the budget, given back once (by `release` or the with block)."""

    def __init__(self, budget: BodyBudget, nbytes: int) -> None:
        self._budget = budget
        self._nbytes = nbytes

    def grow_to(self, nbytes: int, wait: float = 0.0) -> bool:
        """Whether the share could grow to `nbytes` (a body being decompressed) within
        `wait` seconds; it holds them if so."""
        extra = nbytes - self._nbytes
        if extra > 0:
            if not self._budget.take(extra, wait, in_turn=False):
                return False
            self._nbytes = nbytes
        return True

    def shrink_to(self, nbytes: int) -> None:
        """The body is `nbytes` after all: what was reserved beyond that is given back."""
        if nbytes < self._nbytes:
            self._budget.give(self._nbytes - nbytes)
            self._nbytes = nbytes

    def release(self) -> None:
        nbytes, self._nbytes = self._nbytes, 0
        if nbytes:
            self._budget.give(nbytes)

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_PATH = re.compile(r"(?<![\w:/.~-])/[^\s'\"]+")


def without_paths(text: str) -> str:
    """An error message fit for an answer: absolute paths (a store file's, in an OSError)
    become `<path>`."""
    return _PATH.sub("<path>", text)


def store_kind(store: Store) -> str:
    """What kind of store this is, never where: /healthz needs no token, and even with
    one, the collector's answers name no path on its host."""
    kinds = {"EmbeddedStore": "embedded", "ChdbStore": "chdb", "ClickHouseStore": "clickhouse"}
    return kinds.get(type(store).__name__, store.dialect)


class Collector:
    """One store, one writer, any number of receivers."""

    def __init__(
        self,
        store: Store,
        *,
        mapping: FieldMapping = DEFAULT_MAPPING,
        queue_rows: int = DEFAULT_QUEUE_ROWS,
        recent_uids: int = RECENT_UIDS,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        decode_workers: int = 0,
        max_decoding: int | None = None,
        body_budget: int = DEFAULT_BODY_BUDGET,
        token: str | None = None,
    ) -> None:
        self.store = store
        self.max_body_bytes = max_body_bytes
        self.token = token
        self.pipeline = Pipeline(store, queue_rows=queue_rows, recent_uids=recent_uids)
        self.decoder = Decoder(mapping, decode_workers)
        # Bodies decoded at once: enough to keep every decoder busy, few enough that
        # memory stays bounded however many clients send; the rest wait briefly, then 429.
        slots = max_decoding or max(4, 2 * decode_workers)
        self._decoding = threading.BoundedSemaphore(slots)
        # At least one body of the largest size: a compressed body's share grows while it
        # holds some already, and could otherwise never reach the largest size.
        self.bodies = BodyBudget(max(body_budget, max_body_bytes))
        self.decode_budget = BodyBudget(DECODE_BUDGET)  # estimated bytes of decodes under way
        self._closed = False
        self.started = time.time()
        #: Sections a source adds to `health()` (name -> what it reports now).
        self.reports: dict[str, Callable[[], Any]] = {}

    def admit(self, nbytes: int = 0, wait: float = BUDGET_WAIT) -> Admission:
        """A body of `nbytes` may be read: QueueFull while the queue is full, or when the
        bodies held leave no room for it within `wait` seconds. A receiver asks
        before it reads a body, so that a body is not read only to be refused, and
        releases the admission once the rows are queued (`commit`). (A batch that does not
        fit the room left in a queue not yet full is refused after it is decoded, by
        `submit`.)"""
        self._check_queue()
        if not self.bodies.take(nbytes, wait):
            self._budget_full()
        return Admission(self.bodies, nbytes)

    def reserve(self, admission: Admission, nbytes: int) -> None:
        """The admitted body will grow to `nbytes` (it is being decompressed): QueueFull
        when the budget has no room for that within `BUDGET_WAIT` seconds."""
        if not admission.grow_to(nbytes, BUDGET_WAIT):
            self._budget_full()

    def _budget_full(self) -> None:
        self.pipeline.count(throttled=1)
        raise QueueFull(retry_after=1, reason="bodies being received at the limit")

    def _check_queue(self) -> None:
        if self.pipeline.depth >= self.pipeline.queue_rows:
            self.pipeline.count(throttled=1)
            raise QueueFull(retry_after=1)

    def _decode(self, work: Any, cost: int = 0) -> DecodeResult:
        """Run `work` (a decode) in one of the decoding slots, holding `cost` bytes of the
        decoding budget while it runs."""
        _yield_to_writer()
        self._check_queue()
        if not self._decoding.acquire(timeout=DECODE_WAIT):
            self.pipeline.count(throttled=1)
            raise QueueFull(retry_after=1)
        if not self.decode_budget.take(cost, DECODE_WAIT):
            self._decoding.release()
            self.pipeline.count(throttled=1)
            raise QueueFull(retry_after=1, reason="bodies being decoded at the limit")
        try:
            if self._closed:
                raise WriteFailed("the collector is shutting down")
            # On the thread that received the body: handed to a decoding thread and back,
            # each request waited for two more wake-ups (5% fewer spans/s,
            # docs/collector.md). The memory a decode frees stays in its thread's malloc
            # arena, so `dupescope collect` caps the arenas (run.py).
            return work()
        except DecoderUnavailable as exc:
            raise WriteFailed(str(exc)) from exc
        finally:
            self.decode_budget.give(cost)
            self._decoding.release()

    def commit(self, result: DecodeResult, admission: Admission | None = None) -> DecodeResult:
        """Queue the rows and wait until they are durable (QueueFull / WriteFailed). The
        body's admission is released once its rows are queued (or refused): until then
        they are held outside the queue's bound, waiting for their turn to claim."""
        rows = result.table.num_rows
        self.pipeline.count(received=rows, rejected=result.rejected, ignored=result.ignored)
        try:
            ticket = self.pipeline.submit(result.table)
        finally:
            result.table = result.table.slice(0, 0)  # the pipeline holds the only reference
            if admission is not None:
                admission.release()
        ticket.wait(ACK_TIMEOUT)
        result.accepted = rows
        return result

    def decode(self, signal: str, media: str, body: bytes, source: str) -> DecodeResult:
        """A body (unwrapped) of one source -> rows to commit; BodyError for a bad body."""
        native = signal == "traces" and media == "protobuf"
        factor = NATIVE_DECODE_FACTOR if native else PYTHON_DECODE_FACTOR
        return self._decode(
            lambda: self.decoder.decode(signal, media, body, source), factor * len(body)
        )

    def decode_otlp(self, kind: str, body: bytes, fmt: str, source: str) -> DecodeResult:
        """An OTLP export body (unwrapped) -> rows to commit; BodyError for a bad body."""
        return self.decode(kind, fmt, body, source)

    def decode_jsonlines(self, body: bytes, source: str) -> DecodeResult:
        return self.decode("lines", "ndjson", body, source)

    def otlp(self, kind: str, body: bytes, fmt: str, source: str) -> DecodeResult:
        """An OTLP export body (unwrapped, received already: gRPC's) -> durable rows;
        BodyError for a bad body. The body counts against the budget until its rows are
        queued; without room for it, it is refused at once, since waiting would hold it."""
        with self.admit(len(body), wait=0.0) as admission:
            return self.commit(self.decode_otlp(kind, body, fmt, source), admission)

    def jsonlines(self, body: bytes, source: str) -> DecodeResult:
        """A JSON-lines chunk of a tailed file -> durable rows. It takes no share of the
        body budget: a tail holds one chunk at a time, and senders must not starve it."""
        return self.commit(self.decode_jsonlines(body, source))

    def decoded_lines(self, decode: Callable[[], DecodeResult]) -> DecodeResult:
        """A tailed chunk read by the tail's own decoder (one that keeps state from chunk
        to chunk, such as a Celery log's) -> durable rows; like `jsonlines` otherwise."""
        return self.commit(self._decode(decode))

    def bad_request(self) -> None:
        self.pipeline.count(bad_requests=1)

    def reject(self, records: int) -> None:
        """Count records refused before decoding (a tailed line longer than a read)."""
        self.pipeline.count(rejected=records)

    def health(self) -> dict[str, Any]:
        """Counters and state; `status` is "failing" while the latest store write failed
        (until one succeeds, or for `Pipeline.failure_hold` seconds without another try),
        with `last_error` and `failing_since` saying what and since when."""
        data = self.pipeline.snapshot()
        failure = self.pipeline.failure()
        data.update(
            status="failing" if failure else "ok",
            last_error=without_paths(failure.error) if failure else None,
            failing_since=round(failure.since, 3) if failure else None,
            store=store_kind(self.store),
            uptime_s=round(time.time() - self.started, 1),
            decode_workers=self.decoder.workers,
            bodies_held_bytes=self.bodies.held,
            body_budget_bytes=self.bodies.limit,
        )
        for name, report in self.reports.items():
            data[name] = report()
        return data

    def close(self) -> None:
        self._closed = True
        self.pipeline.close()
        self.decoder.close()


__all__ = ["Collector", "QueueFull", "WriteFailed"]
