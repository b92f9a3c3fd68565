"""Celery's event stream (what Flower reads) -> contract rows. Pure: no broker I/O.

A Celery worker started with `-E` (or `worker_send_task_events`) publishes one event per
step of each task, and heartbeats; a producer with `task_send_sent_event` publishes
`task-sent`. Each event becomes at most one row:

| Celery event | row | notes |
|---|---|---|
| task-sent | enqueue | the producer: `celery.hostname` in attrs, no worker_id |
| task-received | deliver | a second one for the same uuid is a redelivery: a new execution |
| task-started | none | remembered: the execution's end row says `celery.started_at` |
| task-succeeded | ack | `celery.runtime`, `celery.result` |
| task-failed | fail | reason = the exception (`WorkerLostError(...)` names a lost child) |
| task-retried | nack | reason = the exception; the retry is the same uuid, received again |
| task-rejected | nack (requeue) / fail | requeued while its run is open: a lost pool process |
| task-revoked | fail | reason says revoked, expired or terminated by which signal |
| task-cancelled | nack | cancelled on a lost broker connection: the message comes back |
| worker-online / offline | worker_start / worker_stop | |
| worker-heartbeat | none | liveness only (one every 2 s a worker: rows would be noise) |

`job_id` is the task's uuid, `worker_id` the worker's `hostname:pid` (the pid of its main
process, which sends every event of its tasks), `ts` the event's own `timestamp` (Unix
seconds on the emitter's clock). Celery counts no deliveries, so `delivery_attempt` stays
empty: every `deliver` starts an execution of its own (the contract's rule for transports
without a count), and `celery.retries` is kept in attrs.

Each row of a run names it (`execution_id`, its deliver's event_uid), because a worker
can hold the same uuid twice: redelivered to another of its pool processes while the first
run still goes on (a visibility timeout on Redis). Celery's events do not say which
delivery they end, so: a task-succeeded's `runtime` tells when its run began, and it ends
the run received last before then; any other end ends the run received last. Rows of a
run the receiver did not see begin (after a restart) name none, and the queries place
them by job_id and worker.

Only task-sent and task-received carry the task's name. The name of each uuid seen is kept
in a bounded map for the rows that follow; a row whose uuid is no longer known (after a
restart) has no job_type, and the queries take it from the job's other rows (its deliver).

A pool process killed under a task (SIGKILL, the OOM killer) is settled by the worker's
main process. With `task_acks_late` and `task_reject_on_worker_lost` (the settings under
which Celery runs such a task again) Celery 5 sends only `task-rejected` with
`requeue=True`, no `task-failed`: a requeue that ends a run still open, with no failure
before it, is read as that loss (reason `WorkerLostError: ...`, a `worker_crash`). After a
failure (a hard time limit sends `task-failed` first) a requeue stays a plain `nack`.
Without `task_reject_on_worker_lost` Celery sends `task-failed` with `WorkerLostError`
(after a `task-rejected` without requeue, under acks_late) and the task does not run again.
A task that raises `Reject(requeue=True)` itself sends the same events as a lost pool
process, and reads as one.

Crash evidence: a worker that goes offline, restarts under a new pid, or sends nothing
for longer than Celery's own rule (`celery.events.state`: no heartbeat within twice its
heartbeat interval) while it held tasks it had not settled loses them. For each, a
`nack` is emitted on the lost worker's behalf: reason `WorkerLost: ...`, `settled_by` this
receiver. Its time is the last the worker was heard of (never later, so a redelivery that
followed the crash is not taken for an overlap), and its event_uid is derived from the
delivery it settles, so however and whenever the loss is noticed it is one row.

With `key_kwargs` (`--celery-key order_id`), the first of those keyword arguments a task
was called with is its idempotency key, on its enqueue and deliver rows (the queries give
it to the job's other rows): then a producer that sent the same order twice, as two task
ids, is a `producer_retry`.

Every row's event_uid is a hash of the event's identity (emitter, uuid, type, timestamp,
Lamport clock): the same event received twice is one row.
"""

from __future__ import annotations

import ast
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from collectors.normalise import RecordError, Row, content_uid
from collectors.timestamps import MICROS_RANGE

SOURCE = "celery-events"
#: Who settles a lost worker's tasks (`settled_by` of the nacks emitted for them).
RECEIVER = "dupescope-celery-events"
#: Celery's rule (celery.events.state.HEARTBEAT_EXPIRE_WINDOW = 200%): a worker is gone
#: once nothing came from it for twice its heartbeat interval.
EXPIRE_FACTOR = 2.0
#: A worker's heartbeat interval until its first heartbeat says (Celery's default).
DEFAULT_FREQ = 2.0
#: The reason of the nack for a task-rejected (requeue) that ends a run still open: its
#: pool process was lost. It names a lost worker, as the contract's worker_crash asks.
LOST_POOL_PROCESS = ("WorkerLostError: the pool process running it was lost (task-rejected, "
                     "requeued, with no failure before it)")
#: Task names remembered, for the rows of events that do not carry one.
KNOWN_TASKS = 100_000
#: The longest kwargs repr read for a key (Celery cuts its own at 1024 characters).
MAX_KWARGS_REPR = 64 * 1024
#: Unsettled tasks remembered a worker (a worker whose events went missing grows no more).
TASKS_PER_WORKER = 10_000
#: How far a task-succeeded's start (its time less its runtime) may fall before the
#: task-received of its run: the pool process and the main process stamp them apart.
START_SLACK_US = 2_000

_TASK_ROWS = {
    "task-sent": "enqueue",
    "task-received": "deliver",
    "task-succeeded": "ack",
    "task-failed": "fail",
    "task-retried": "nack",
    "task-cancelled": "nack",
    "task-revoked": "fail",
}
_SETTLING = frozenset(
    {"task-succeeded", "task-failed", "task-retried", "task-rejected", "task-revoked",
     "task-cancelled"}
)
_WORKER_ROWS = {"worker-online": "worker_start", "worker-offline": "worker_stop"}
#: The fields every event has, which become columns or the uid, not attrs.
_ENVELOPE = frozenset({"type", "hostname", "pid", "timestamp", "uuid", "name", "queue"})


@dataclass
class _Task:
    """One delivery of a task that a worker received and has not settled yet."""

    deliver_uid: str
    job_type: str | None
    queue: str | None
    received_ts: int  # µs
    last_ts: int  # µs, the latest of its events on this worker
    started_at: int | None = None


@dataclass
class _Worker:
    worker_id: str
    hostname: str
    freq: float = DEFAULT_FREQ
    last_ts: int = 0  # µs on its clock: the last event from it
    heard_at: float = 0.0  # the receiver's clock (seconds) when that came
    #: Its unsettled deliveries by task uuid, each list in the order received.
    tasks: OrderedDict[str, list[_Task]] = field(default_factory=OrderedDict)


@dataclass
class Mapped:
    """What one event gave: its row (None for a heartbeat or a kind with no row) and the
    nacks of tasks lost with a worker it revealed as gone."""

    row: Row | None = None
    lost: list[Row] = field(default_factory=list)

    def rows(self) -> list[Row]:
        return ([self.row] if self.row is not None else []) + self.lost


def _seconds_to_micros(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"timestamp must be Unix seconds, got {value!r}")
    if not math.isfinite(value):
        raise RecordError(f"timestamp must be finite, got {value!r}")
    micros = round(value * 1_000_000)
    if not MICROS_RANGE[0] <= micros <= MICROS_RANGE[1]:
        raise RecordError(f"timestamp out of range (years 1 to 9999): {value!r}")
    return micros


def _text(event: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = event.get(key)
    if value is None or value == "":
        if required:
            raise RecordError(f"no {key}")
        return None
    if not isinstance(value, str):
        raise RecordError(f"{key} must be a string, got {type(value).__name__}")
    return value


def worker_id_of(hostname: str, pid: Any) -> str:
    """`hostname:pid`, or the hostname alone where the event has no pid."""
    return f"{hostname}:{pid}" if isinstance(pid, int) and not isinstance(pid, bool) else hostname


def event_uid(event: Mapping[str, Any]) -> str:
    """The same event, however often it arrives, has one uid: who sent it, about which
    task, what, when (its timestamp as sent) and its Lamport clock."""
    return content_uid(
        SOURCE, event.get("hostname"), event.get("pid"), event.get("uuid"),
        event.get("type"), repr(event.get("timestamp")), event.get("clock"),
    )


def _attrs(values: dict[str, Any]) -> str | None:
    kept = {k: v for k, v in values.items() if v is not None}
    return orjson.dumps(kept, default=str).decode() if kept else None


class CeleryEventMapper:
    """Maps events to rows, keeping what later events need: task names, and which worker
    holds which unsettled task (for the crash evidence). Bounded; not thread-safe (one
    receiving loop owns it)."""

    def __init__(
        self,
        *,
        key_kwargs: tuple[str, ...] = (),
        known_tasks: int = KNOWN_TASKS,
        tasks_per_worker: int = TASKS_PER_WORKER,
    ) -> None:
        self._key_kwargs = key_kwargs
        self._known_tasks = known_tasks
        self._tasks_per_worker = tasks_per_worker
        self._names: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
        self._workers: dict[str, _Worker] = {}  # by worker_id
        self._pids: dict[str, str] = {}  # hostname -> the worker_id it last spoke as
        self._stream_ts = 0  # µs: the latest worker event's timestamp

    # -- the events -------------------------------------------------------------------

    def map(self, event: Any, heard_at: float) -> Mapped:
        """One decoded event -> its row and any lost-worker nacks. `heard_at` is when it
        was received, on the receiver's clock (seconds), as Celery judges liveness.
        Raises RecordError, naming what is wrong, for an event that is not one."""
        if not isinstance(event, Mapping):
            raise RecordError(f"an event must be an object, got {type(event).__name__}")
        kind = _text(event, "type", required=True)
        assert kind is not None
        hostname = _text(event, "hostname", required=True)
        assert hostname is not None
        ts = _seconds_to_micros(event.get("timestamp"))
        worker_id = worker_id_of(hostname, event.get("pid"))
        if kind.startswith("task-"):
            return self._task(kind, event, hostname, worker_id, ts, heard_at)
        if kind.startswith("worker-"):
            return self._worker_event(kind, event, hostname, worker_id, ts, heard_at)
        return Mapped()  # another kind (a custom event): no row

    def _task(
        self, kind: str, event: Mapping[str, Any], hostname: str, worker_id: str, ts: int,
        heard_at: float,
    ) -> Mapped:
        job_id = _text(event, "uuid", required=True)
        assert job_id is not None
        name = _text(event, "name", required=False)
        queue = _text(event, "queue", required=False)
        if kind == "task-sent":
            self._remember(job_id, name, queue)
            row = self._row(event, "enqueue", ts, job_id, name, queue, None,
                            {"celery.hostname": hostname, "celery.pid": event.get("pid")})
            return Mapped(self._keyed(row, event))
        mapped = Mapped()
        mapped.lost = self._heard(hostname, worker_id, ts, heard_at)
        known_name, known_queue = self._names.get(job_id, (None, None))
        name, queue = name or known_name, queue or known_queue
        if kind == "task-received":
            self._remember(job_id, name, queue)
        worker = self._workers[worker_id]
        runs = worker.tasks.get(job_id, [])
        task: _Task | None = None
        extra: dict[str, Any] = {}
        if kind == "task-received":
            row_kind = "deliver"
        elif kind == "task-started":
            task = next((r for r in reversed(runs) if r.started_at is None), None)
            if task is not None:
                task.started_at, task.last_ts = ts, max(task.last_ts, ts)
            return mapped
        elif kind == "task-rejected":
            requeue = bool(event.get("requeue"))
            row_kind = "nack" if requeue else "fail"
            extra["reason"] = "rejected, requeued" if requeue else "rejected"
            if requeue and _ended(runs, event, ts, kind) is not None:
                # Requeued with its run still open, no failure first: what Celery sends
                # when the pool process running it died (acks_late with
                # task_reject_on_worker_lost), settled by the main process.
                extra["reason"] = LOST_POOL_PROCESS
        elif kind in _TASK_ROWS:
            row_kind = _TASK_ROWS[kind]
            extra["reason"] = self._reason(kind, event)
        else:
            return mapped  # a task event of a later Celery: no row
        if kind in _SETTLING:
            task = _ended(runs, event, ts, kind)
        if task is not None and task.started_at is not None:
            extra["celery.started_at"] = task.started_at / 1e6
        row = self._row(event, row_kind, ts, job_id, name, queue, worker_id, extra)
        mapped.row = self._keyed(row, event) if kind == "task-received" else row
        if kind == "task-received":
            row["execution_id"] = row["event_uid"]
            worker.tasks.setdefault(job_id, []).append(
                _Task(row["event_uid"], name, queue, ts, ts))
            worker.tasks.move_to_end(job_id)
            while len(worker.tasks) > self._tasks_per_worker:
                worker.tasks.popitem(last=False)
        elif task is not None:
            row["execution_id"] = task.deliver_uid
            runs.remove(task)
            if not runs:
                del worker.tasks[job_id]
        return mapped

    @staticmethod
    def _reason(kind: str, event: Mapping[str, Any]) -> str | None:
        if kind == "task-revoked":
            if event.get("expired"):
                return "revoked: expired"
            if event.get("terminated"):
                return f"revoked: terminated by signal {event.get('signum')}"
            return "revoked"
        if kind == "task-cancelled":
            return "cancelled: the worker lost its broker connection"
        exception = event.get("exception")
        return None if exception is None else str(exception)

    def _worker_event(
        self, kind: str, event: Mapping[str, Any], hostname: str, worker_id: str, ts: int,
        heard_at: float,
    ) -> Mapped:
        mapped = Mapped()
        mapped.lost = self._heard(hostname, worker_id, ts, heard_at)
        worker = self._workers[worker_id]
        freq = event.get("freq")
        if isinstance(freq, int | float) and not isinstance(freq, bool) and freq > 0:
            worker.freq = float(freq)
        row_kind = _WORKER_ROWS.get(kind)
        if row_kind is None:
            return mapped  # a heartbeat: liveness, no row
        extra = {
            f"celery.{key}": event.get(key) for key in ("sw_ident", "sw_ver", "sw_sys", "freq")
        }
        mapped.row = self._row(event, row_kind, ts, None, None, None, worker_id, extra)
        if kind == "worker-offline":
            mapped.lost += self._lose(worker, "went offline")
        return mapped

    # -- liveness ---------------------------------------------------------------------

    def _heard(self, hostname: str, worker_id: str, ts: int, heard_at: float) -> list[Row]:
        """Note a sign of life; a host now speaking under a new pid lost the old process."""
        lost: list[Row] = []
        previous = self._pids.get(hostname)
        if previous is not None and previous != worker_id and previous in self._workers:
            lost = self._lose(self._workers[previous], f"was replaced by {worker_id}")
        self._pids[hostname] = worker_id
        worker = self._workers.get(worker_id)
        if worker is None:
            worker = self._workers[worker_id] = _Worker(worker_id, hostname)
        worker.last_ts = max(worker.last_ts, ts)
        self._stream_ts = max(self._stream_ts, ts)
        worker.heard_at = max(worker.heard_at, heard_at)
        return lost

    def expire(self, now: float, caught_up: bool = True) -> list[Row]:
        """The nacks of tasks held by workers silent past Celery's rule at `now` (the
        receiver's clock); those workers are forgotten. A receiver that is not
        `caught_up` (events are waiting for it) may simply not have read a worker's
        latest heartbeats yet: then a worker is silent only if the stream itself has
        moved on past its window too (other workers' events, on their clocks)."""
        lost: list[Row] = []
        for worker in list(self._workers.values()):
            window = worker.freq * EXPIRE_FACTOR
            silent = now - worker.heard_at
            if silent <= window:
                continue
            if not caught_up and (self._stream_ts - worker.last_ts) / 1e6 <= window:
                continue
            lost += self._lose(
                worker, f"missed its heartbeats (none for {silent:.1f} s, every "
                f"{worker.freq:g} s expected)"
            )
        return lost

    def grace(self, now: float) -> None:
        """The receiver was cut off from the broker until `now`: a worker's silence
        meanwhile says nothing about it, so every worker counts as heard now."""
        for worker in self._workers.values():
            worker.heard_at = max(worker.heard_at, now)

    def forget_unsettled(self) -> None:
        """Events may have been missed (a Redis broker keeps none for an absent
        receiver): what each worker holds is no longer known, and a task settled unseen
        must not be reported lost later."""
        for worker in self._workers.values():
            worker.tasks.clear()

    def unsettled(self) -> dict[str, list[str]]:
        """The task uuids each worker holds unsettled, by worker_id (for health and tests)."""
        return {w.worker_id: list(w.tasks) for w in self._workers.values() if w.tasks}

    def _lose(self, worker: _Worker, how: str) -> list[Row]:
        """Forget `worker`; a nack for each task it held, on its behalf."""
        self._workers.pop(worker.worker_id, None)
        if self._pids.get(worker.hostname) == worker.worker_id:
            del self._pids[worker.hostname]
        rows = []
        held = [(job_id, task) for job_id, runs in worker.tasks.items() for task in runs]
        for job_id, task in held:
            ts = max(task.last_ts, worker.last_ts)
            rows.append({
                "event_uid": content_uid(SOURCE, "lost", worker.worker_id, job_id,
                                         task.deliver_uid),
                "ts": ts,
                "event": "nack",
                "job_id": job_id,
                "job_type": task.job_type,
                "queue": task.queue,
                "worker_id": worker.worker_id,
                "source": SOURCE,
                "execution_id": task.deliver_uid,
                "attrs": _attrs({
                    "reason": f"WorkerLost: worker {worker.worker_id} {how} "
                              f"{'while running' if task.started_at else 'holding'} the task",
                    "settled_by": RECEIVER,
                    "celery.started_at": task.started_at / 1e6 if task.started_at else None,
                }),
            })
        return rows

    # -- rows -------------------------------------------------------------------------

    def _remember(self, job_id: str, name: str | None, queue: str | None) -> None:
        known = self._names.get(job_id)
        if known is not None:
            name, queue = name or known[0], queue or known[1]
        self._names[job_id] = (name, queue)
        self._names.move_to_end(job_id)
        while len(self._names) > self._known_tasks:
            self._names.popitem(last=False)

    def _keyed(self, row: Row, event: Mapping[str, Any]) -> Row:
        """The row with the idempotency key read from the task's keyword arguments (the
        first of `key_kwargs` present), where the event carries them."""
        if self._key_kwargs:
            row["idempotency_key"] = key_from_kwargs(event.get("kwargs"), self._key_kwargs)
        return row

    @staticmethod
    def _row(
        event: Mapping[str, Any], kind: str, ts: int, job_id: str | None,
        job_type: str | None, queue: str | None, worker_id: str | None,
        extra: dict[str, Any],
    ) -> Row:
        rest = {f"celery.{k}": v for k, v in event.items() if k not in _ENVELOPE}
        rest.update(extra)
        if "celery.retries" in rest and not isinstance(rest["celery.retries"], int):
            raise RecordError(f"retries must be an integer, got {rest['celery.retries']!r}")
        return {
            "event_uid": event_uid(event),
            "ts": ts,
            "event": kind,
            "job_id": job_id,
            "job_type": job_type,
            "queue": queue,
            "worker_id": worker_id,
            "source": SOURCE,
            "attrs": _attrs(rest),
        }


def _ended(runs: list[_Task], event: Mapping[str, Any], ts: int, kind: str) -> _Task | None:
    """The delivery a settling event ends, of a worker's open `runs` of its uuid: the one
    received last before the run began (a task-succeeded's time less its runtime), else
    before the event; the oldest if none was.

    A task-rejected ends the oldest run that started: the main process notices a lost
    pool process seconds after it died, and on Redis the visibility timeout may have
    handed the message out again meanwhile (received, even started, before the
    rejection): the run that died is the one that was running, not that redelivery."""
    if not runs:
        return None
    started = [r for r in runs if r.started_at is not None]
    if kind == "task-rejected" and started:
        return started[0]
    began = ts
    runtime = event.get("runtime")
    if isinstance(runtime, int | float) and not isinstance(runtime, bool) \
            and math.isfinite(runtime) and runtime >= 0:
        began = ts - round(runtime * 1_000_000) + START_SLACK_US
    before = [r for r in runs if r.received_ts <= began]
    return before[-1] if before else runs[0]


def key_from_kwargs(kwargs: Any, names: tuple[str, ...]) -> str | None:
    """The first of `names` in a task's keyword arguments, as text. Celery sends them as
    their repr (`"{'order_id': 'o-1'}"`, cut at 1024 characters by its
    `argsrepr_maxsize`), read here as a Python literal, never evaluated; one that is
    not a literal (an object's repr, or a cut one) gives no key."""
    if isinstance(kwargs, dict):
        values = kwargs
    elif isinstance(kwargs, str) and kwargs.startswith("{") and len(kwargs) <= MAX_KWARGS_REPR:
        try:
            values = ast.literal_eval(kwargs)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if not isinstance(values, dict):
            return None
    else:
        return None
    for name in names:
        value = values.get(name)
        if value is not None and not isinstance(value, dict | list | tuple | set):
            return str(value)
    return None


def events_of(body: Any) -> Iterable[Any]:
    """A message's events: Celery 4+ sends a list of them (a worker buffers task events),
    older ones a single object."""
    return body if isinstance(body, list) else [body]
