"""Group commit: many receivers hand over Arrow batches, one writer thread stores them.

A receiver may acknowledge a batch only once it is durable, and a store write (an fsynced
segment, a ClickHouse insert) costs about the same for 1 row as for 50,000. So a batch's
event_uids are claimed as it is queued (rows written recently, or queued already, are
dropped as repeats: a resent batch), and a single writer thread takes everything pending,
merges it into one Arrow table, writes once, and then releases every waiting receiver.
The queue is bounded in rows: when it is full a receiver is told to retry later (HTTP 429
/ gRPC RESOURCE_EXHAUSTED) instead of the process growing.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from collectors.service.log_limit import SummarisedLog, clock_time
from store.base import Store
from store.schema import EVENTS_SCHEMA, as_events, concat, is_runs

try:
    from collectors._uid_memory import UidMemory
except ImportError:  # built without a C compiler
    UidMemory = None

log = logging.getLogger("dupescope.collect")

MAX_MERGE_ROWS = 200_000
#: A group commit merges batches up to this many bytes too (merging copies them): rows of
#: 10 MB attributes are few rows and many bytes.
MAX_MERGE_BYTES = 32 * 1024 * 1024
#: The queue's bound in bytes, beside its bound in rows; see `Pipeline`.
DEFAULT_QUEUE_BYTES = 64 * 1024 * 1024
RECENT_UIDS = 1_000_000
_NO_ROWS = EVENTS_SCHEMA.empty_table()


class QueueFull(RuntimeError):
    """The bounded queue cannot take this batch now; the sender should retry later."""

    def __init__(self, retry_after: int, reason: str = "queue full") -> None:
        super().__init__(f"{reason}, retry after {retry_after}s")
        self.retry_after = retry_after


class WriteFailed(RuntimeError):
    """The store refused a batch; nothing of it was acknowledged."""


@dataclass
class Ticket:
    """One submitted batch; `wait` returns once it is durable (or raises WriteFailed).

    `table` holds the rows still to write: those whose event_uid the batch claimed, its
    `repeats` (written recently, or earlier in the batch) dropped at submission.
    """

    table: pa.Table
    rows: int = 0
    repeats: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    written: int = 0
    nbytes: int = 0

    def wait(self, timeout: float | None = None) -> int:
        if not self.done.wait(timeout):
            raise WriteFailed(f"not durable after {timeout}s")
        if self.error is not None:
            raise WriteFailed(str(self.error)) from self.error
        return self.written


def _one_array(uids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The column as one array: its only chunk as it is (a request's column has one),
    else the chunks joined."""
    if not isinstance(uids, pa.ChunkedArray):
        return uids
    return uids.chunk(0) if uids.num_chunks == 1 else uids.combine_chunks()


class RecentUids:
    """A bounded memory of event_uids already written: resends are skipped, not rewritten.

    Holds the last `capacity` / 2 to `capacity` uids. Checked a column at a time by the
    native `UidMemory` (two tables of 16-byte slots, each at least `capacity` slots: 32 to
    64 bytes of memory a uid) where it was built, by a Python dict otherwise.
    A batch claims its uids as it is queued; a write that fails gives its claims back, so
    the sender's retry is written.
    """

    def __init__(
        self, capacity: int = RECENT_UIDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.capacity = capacity
        self._native = UidMemory(capacity) if UidMemory is not None else None
        self._uids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._clock = clock
        self._started = clock()
        self._rolls = 0
        self._roll_times: deque[float] = deque(maxlen=2)  # when the last two generations began

    def window_seconds(self) -> float | None:
        """How far back the memory reaches now: a resend of anything claimed since then
        is a repeat (the previous generation began then). At a high rate it is short,
        and a larger capacity lengthens it. None for the Python memory, which counts
        uids, not generations."""
        if self._native is None:
            return None
        with self._lock:
            since = self._roll_times[0] if len(self._roll_times) == 2 else self._started
            return self._clock() - since

    def _note_rolls(self) -> None:
        rolls = self._native.rolls
        if rolls != self._rolls:
            now = self._clock()
            self._roll_times.extend([now] * min(rolls - self._rolls, 2))
            self._rolls = rolls

    def claim(self, uids: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """True for each uid neither remembered nor earlier in `uids`; those are now
        remembered."""
        column = _one_array(uids)
        with self._lock:
            if self._native is None:
                return self._claim_in_python(column)
            offsets, data = column.buffers()[1:3]
            mask = self._native.claim(offsets, data or b"", column.offset, len(column))
            self._note_rolls()
            return np.frombuffer(mask, dtype=np.bool_)

    def release(self, uids: pa.ChunkedArray | pa.Array) -> None:
        """Forget claimed uids whose rows were not written after all."""
        column = _one_array(uids)
        with self._lock:
            if self._native is None:
                for uid in column.to_pylist():
                    self._uids.pop(uid, None)
                return
            offsets, data = column.buffers()[1:3]
            self._native.forget(offsets, data or b"", column.offset, len(column))

    def _claim_in_python(self, column: pa.Array) -> np.ndarray:
        store = self._uids
        keep = []
        for uid in column.to_pylist():
            fresh = uid not in store
            keep.append(fresh)
            store[uid] = None
        while len(store) > self.capacity:
            store.popitem(last=False)
        return np.array(keep, dtype=np.bool_)


@dataclass
class Stats:
    """Counters for /healthz: what came in, what was refused, how the writer keeps up."""

    received: int = 0
    rejected: int = 0
    ignored: int = 0
    deduplicated: int = 0
    written: int = 0
    writes: int = 0
    write_errors: int = 0
    throttled: int = 0
    bad_requests: int = 0
    last_write_ms: float = 0.0
    max_write_ms: float = 0.0
    total_write_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["mean_write_ms"] = round(self.total_write_ms / self.writes, 3) if self.writes else 0.0
        return data


#: Upper bounds, in seconds, of the buckets group commits' durations are counted in.
WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Durations:
    """How long group commits took, counted into fixed buckets (a Prometheus histogram):
    percentiles can be read off it, and it stays the same size however long the collector
    runs."""

    bounds: tuple[float, ...] = WRITE_BUCKETS
    #: Commits per bucket, not cumulative; the last one is those above every bound.
    counts: list[int] = field(default_factory=list)
    total_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def add(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1  # a bound is inclusive
        self.total_seconds += seconds

    def copy(self) -> Durations:
        return Durations(self.bounds, list(self.counts), self.total_seconds)


@dataclass
class Failure:
    """Store writes failing: since when (Unix seconds), how many, the latest error and
    when it came (monotonic seconds)."""

    since: float
    count: int = 0
    last: float = 0.0
    error: str = ""


class Pipeline:
    """The bounded queue plus its single writer thread.

    The queue is bounded in rows (`queue_rows`) and in bytes (`queue_bytes`): a row count
    alone let rows of multi-MB attributes queue hundreds of MB, one client's body each.
    """

    #: Seconds a failed store write keeps the collector reported as failing.
    failure_hold = 30.0
    #: Seconds after which a store write still under way is reported as a failure.
    stuck_after = 60.0

    def __init__(
        self,
        store: Store,
        *,
        queue_rows: int = 200_000,
        recent_uids: int = RECENT_UIDS,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self.store = store
        self.queue_rows = queue_rows
        self.queue_bytes = queue_bytes
        self.stats = Stats()
        self._durations = Durations()
        # While the latest store write failed: a store that cannot be written is what a
        # health check has to show.
        self._failure: Failure | None = None
        self._writing_since: float | None = None  # monotonic start of a write under way
        self._failures_log = SummarisedLog(log)  # one line per failed write would flood it
        self._pending: deque[Ticket] = deque()
        self._pending_rows = 0
        self._pending_bytes = 0
        self._cond = threading.Condition()
        self._claims = threading.Lock()  # taken before _cond where both are
        self._recent = RecentUids(recent_uids)
        # Hot segments where the store has them: a group commit is small and compaction
        # soon rewrites it, so the cheapest durable form wins (store/hot_segments.py).
        segmented = store.segmented()
        self._store_write = segmented.write_hot if segmented is not None else store.write
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="dupescope-writer", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Rows waiting for the writer."""
        return self._pending_rows

    def count(self, **deltas: int) -> None:
        """Add to named counters of `Stats` (received=, rejected=, throttled=, ...)."""
        with self._cond:
            for name, delta in deltas.items():
                setattr(self.stats, name, getattr(self.stats, name) + delta)

    def submit(self, table: pa.Table) -> Ticket:
        """Queue a batch for the writer; raises QueueFull rather than grow past the bound.

        Its rows are claimed here, in the order batches are queued, so that a batch that
        dropped repeats of another's rows is queued behind that other, and is answered
        only once those rows are durable.
        """
        ticket = Ticket(table, rows=table.num_rows)
        if table.num_rows == 0:
            ticket.done.set()
            return ticket
        if not is_runs(table):  # kept run-end encoded: the hot segments store it so
            table = as_events(table)
        ticket.nbytes = table.nbytes
        # Claiming and queueing under a lock of their own: the writer, which takes the
        # queue's lock to take batches and to answer them, never waits for a claim.
        with self._claims:
            with self._cond:
                if self._stopping:
                    raise WriteFailed("the collector is shutting down")
                # One oversized batch is let in when the queue is empty, or it never could be.
                if self._pending_rows and (
                    self._pending_rows + table.num_rows > self.queue_rows
                    or self._pending_bytes + ticket.nbytes > self.queue_bytes
                ):
                    self.stats.throttled += 1
                    raise QueueFull(retry_after=1)
            keep = self._recent.claim(table.column("event_uid"))
            if not keep.all():  # Arrow filters no runs: a resent batch's rows come out plain
                table = as_events(table).filter(pa.array(keep, type=pa.bool_()))
            ticket.table, ticket.repeats = table, ticket.rows - table.num_rows
            with self._cond:
                self._pending.append(ticket)
                self._pending_rows += ticket.rows
                self._pending_bytes += ticket.nbytes
                self._cond.notify()
        return ticket

    def _take(self) -> list[Ticket]:
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            taken: list[Ticket] = []
            rows = nbytes = 0
            while self._pending and (not taken or (
                rows + self._pending[0].rows <= MAX_MERGE_ROWS
                and nbytes + self._pending[0].nbytes <= MAX_MERGE_BYTES
            )):
                ticket = self._pending.popleft()
                rows += ticket.rows
                nbytes += ticket.nbytes
                taken.append(ticket)
            return taken

    def _run(self) -> None:
        while True:
            tickets = self._take()
            if not tickets:
                return  # stopping, and nothing is left
            self._write(tickets)

    def _write(self, tickets: list[Ticket]) -> None:
        started = time.perf_counter()
        error: BaseException | None = None
        written = 0
        fresh = [t.table for t in tickets if t.table.num_rows]
        if fresh:
            with self._cond:
                self._writing_since = time.monotonic()
        try:
            if fresh:  # else every row was a repeat: nothing reaches the store
                written = self._store_write(concat(fresh))
        except Exception as exc:  # a sink's error is reported to the senders, never raised
            self._failures_log.warn("write", "store write failed: %s", exc, exc_info=True)
            error = exc
        elapsed_ms = (time.perf_counter() - started) * 1000
        if error is not None:
            with self._claims, self._cond:  # no batch is claimed or queued meanwhile
                tickets = tickets + self._fail_repeaters()
                for ticket in tickets:
                    self._recent.release(ticket.table.column("event_uid"))  # the retry gets in
        recovered: Failure | None = None
        with self._cond:
            self._writing_since = None
            for ticket in tickets:
                self._pending_rows -= ticket.rows
                self._pending_bytes -= ticket.nbytes
            stats = self.stats
            if error is None:
                stats.deduplicated += sum(t.repeats for t in tickets)
            if error is None and fresh:  # the store took a write: it works again
                stats.writes += 1
                stats.written += written
                stats.last_write_ms = round(elapsed_ms, 3)
                stats.max_write_ms = max(stats.max_write_ms, stats.last_write_ms)
                stats.total_write_ms += elapsed_ms
                self._durations.add(elapsed_ms / 1000)
                recovered, self._failure = self._failure, None
            elif error is not None:
                stats.write_errors += 1
                failure = self._failure or Failure(since=time.time())
                failure.count += 1
                failure.last = time.monotonic()
                failure.error = f"{type(error).__name__}: {error}"
                self._failure = failure
        if recovered is not None:  # logged outside the lock a submit waits for
            log.warning("store writes succeed again, after %d failed since %s",
                        recovered.count, clock_time(recovered.since))
        for ticket in tickets:
            ticket.error = error
            ticket.written = ticket.rows if error is None else 0
            ticket.table = _NO_ROWS  # the memory goes back now
            ticket.done.set()

    def _fail_repeaters(self) -> list[Ticket]:
        """Take the queued batches that dropped repeats: the rows they left out may be the
        ones just lost, so they fail too, and their senders send them again."""
        kept: deque[Ticket] = deque()
        failed = []
        for ticket in self._pending:
            (failed if ticket.repeats else kept).append(ticket)
        self._pending = kept
        return failed

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            data = self.stats.as_dict()
            data["queue_depth"] = self._pending_rows
            data["queue_batches"] = len(self._pending)
            data["queue_capacity"] = self.queue_rows
            data["queue_bytes"] = self._pending_bytes
        data["recent_uids"] = self._recent.capacity
        window = self._recent.window_seconds()
        data["dedupe_window_s"] = None if window is None else round(window, 3)
        return data

    def failure(self) -> Failure | None:
        """The failure of the latest store write, while it is less than `failure_hold`
        seconds old or a write is under way; None once a write succeeded, or after that.
        The expiry is for readiness probes: a collector taken out of service for failing
        gets no more batches, so no write could succeed and bring it back; after the hold
        it is ready again, and the next batch tries the store anew. A write that has run
        for `stuck_after` seconds is a failure of its own (a store that no longer
        answers)."""
        now = time.monotonic()
        with self._cond:
            failure, writing_since = self._failure, self._writing_since
        if writing_since is not None and now - writing_since >= self.stuck_after:
            since = time.time() - (now - writing_since)
            stuck = f"a store write has run for {now - writing_since:.0f} s"
            return Failure(since=failure.since if failure else since,
                           count=failure.count if failure else 0, last=now, error=stuck)
        if failure is None:
            return None
        if writing_since is None and now - failure.last >= self.failure_hold:
            return None
        return dataclasses.replace(failure)

    def durations(self) -> Durations:
        """The successful group commits' durations so far (a copy)."""
        with self._cond:
            return self._durations.copy()

    def close(self, timeout: float = 30.0) -> None:
        """Write what is pending, then stop the writer."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)
