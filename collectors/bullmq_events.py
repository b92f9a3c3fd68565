"""BullMQ's events streams (what QueueEvents reads) -> contract rows. Pure: no Redis I/O.

BullMQ (6.x) appends one entry to the Redis stream `<prefix>:<queue>:events` for each step
of each job, from the same Lua scripts that make the step; the stream id carries the
server's millisecond time. The job hash `<prefix>:<queue>:<id>` holds what the entries
lack (the job's `data`, `ats` attempts started, `atm` attempts made, `stc` stalls, `pb`
the name of the worker that took it, when the Worker has a name). Each entry becomes at
most one row:

| entry | row | notes |
|---|---|---|
| added | enqueue | job_type = the job's name; the key from its `data` (mapping file) |
| active | deliver | delivery_attempt = the actives of this job counted, else `ats` |
| completed | ack | |
| failed | fail | reason = failedReason (BullMQ writes it only when no retry is left) |
| waiting, prev=active | nack (retried) | unless a `stalled` entry for the job follows it |
| delayed while running | nack (retried after a backoff) | |
| stalled | the stall of the run that held the job: see below | |
| duplicated, deduplicated | enqueue_deduped | |

The rest (waiting after added, progress, removed, drained, ...) give no row.

Stall or crash: the stream says only that a job's lock lapsed. A worker whose event loop
was blocked past its lock is alive and still running the job; a killed worker is gone.
Where the receiver sees the job's worker connection (`CLIENT LIST`, named workers: the
connection is named `<prefix>:<base64(queue)>:w:<name>`) it tells them apart:

- its connection at the run's start is gone at the stall: a `nack` on the run's behalf,
  reason `WorkerLost: ...`, settled_by the receiver (cause `worker_crash`);
- still there, and the job re-run on another worker while it is: a `lock_expired` row of
  the stalled run dated when its worker was seen still connected after the re-run began
  (cause `visibility_timeout`: the stalled run never records its own end, whose
  completion fails with "Missing lock");
- otherwise a `lock_expired` row at the stall, attrs `bullmq.stall` = `stall or crash`
  (the run then went silent: the queries say `worker_crash`).

Jobs are keyed on (queue, id): `job_id` is `<queue>:<id>`. A job id added again after its
job was removed (a custom jobId with removeOnComplete) is a new job: `<queue>:<id>@<stream
id of its added>`, with the first one's key (or `<queue>:<id>`), so the two runs are one
key enqueued as two job ids, a `producer_retry`.

Every row's event_uid is a hash of the stream (Redis, prefix, queue) and the entry's id:
read twice, one row.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import RecordError, Row, content_uid, flatten

SOURCE = "bullmq-events"
#: Who settles a crashed worker's runs (`settled_by` of the nacks emitted for them).
RECEIVER = "dupescope-bullmq"
#: Jobs remembered (names, keys, runs), for the entries that name only the job id.
KNOWN_JOBS = 100_000
#: How old (ms) an entry may be when the worker connections are looked at for it: older
#: entries are from a backlog, and the connections seen now say nothing about then.
FRESH_MS = 3_000
#: The job hash fields read for each job an entry names.
HASH_FIELDS = ("name", "data", "ats", "atm", "stc", "pb", "deid", "processedOn",
               "failedReason")
#: Longest returnvalue / failedReason kept in attrs.
MAX_TEXT = 2_000

STALL = "stall"
CRASH = "crash"
STALL_OR_CRASH = "stall or crash"


@dataclass(frozen=True)
class Entry:
    """One events-stream entry of one queue."""

    queue: str
    stream_id: str
    fields: Mapping[str, str]


@dataclass(frozen=True)
class Clients:
    """The worker connections Redis listed (`CLIENT LIST`) at `now_ms`, its own clock:
    connection ids by client name."""

    now_ms: int
    ids_by_name: Mapping[str, frozenset[str]]


@dataclass
class _Run:
    deliver_uid: str
    worker: str | None  # the job hash's `pb`
    start_us: int
    #: Its worker's connections listed just after its start (None: not listed). Empty:
    #: the worker had already gone (it took the job, so it was connected at the start).
    holder_ids: frozenset[str] | None


@dataclass
class _Job:
    job_id: str
    key: str | None = None
    name: str | None = None
    saw_added: bool = False
    actives: int = 0
    run: _Run | None = None
    #: A run judged stalled with its worker still connected, and when (µs) it stalled.
    stalled: tuple[_Run, str, int] | None = None


@dataclass
class _Pending:
    """A `waiting` (prev=active): a retried failure, unless a `stalled` entry follows."""

    entry: Entry
    ts: int
    failed_reason: str | None


def parse_stream_id(stream_id: str) -> tuple[int, int]:
    """`<ms>-<seq>` -> (ms, seq); RecordError if it is not one."""
    ms, sep, seq = stream_id.partition("-")
    if not sep or not ms.isdigit() or not seq.isdigit():
        raise RecordError(f"not a stream id: {stream_id!r}")
    return int(ms), int(seq)


def previous_id(stream_id: str) -> str:
    """The largest stream id before this one (XREAD reads after the id it is given)."""
    ms, seq = parse_stream_id(stream_id)
    return f"{ms}-{seq - 1}" if seq else f"{ms - 1}-{2**64 - 1}"


def entry_micros(stream_id: str) -> int:
    """The entry's time in µs: its millisecond, plus its sequence (at most 999) so that
    entries of one millisecond keep their order."""
    ms, seq = parse_stream_id(stream_id)
    return ms * 1000 + min(seq, 999)


def worker_client_name(prefix: str, queue: str, worker: str) -> str:
    """The name BullMQ gives a named Worker's connection."""
    return f"{prefix}:{base64.b64encode(queue.encode()).decode()}:w:{worker}"


def _attrs(values: dict[str, Any]) -> str | None:
    kept = {k: v for k, v in values.items() if v is not None}
    return orjson.dumps(kept, default=str).decode() if kept else None


def _cut(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


class BullMQMapper:
    """Maps one Redis's events-stream entries to rows, keeping what later entries need
    (job names, keys, the run each job is in). Bounded; one reading loop owns it."""

    def __init__(
        self,
        *,
        stream_name: str,
        prefix: str = "bull",
        mapping: FieldMapping = DEFAULT_MAPPING,
        known_jobs: int = KNOWN_JOBS,
    ) -> None:
        self.stream_name = stream_name  # the Redis, as shown (no password): in every uid
        self.prefix = prefix
        self._key_names = mapping.sources_for("idempotency_key")
        self._resource_names = mapping.sources_for("resource_key")
        self._known_jobs = known_jobs
        self._jobs: OrderedDict[tuple[str, str], _Job] = OrderedDict()
        self._pending: dict[str, _Pending] = {}  # by queue

    # -- entry points -----------------------------------------------------------------

    def map(
        self, entry: Entry, job_hash: Mapping[str, str | None] | None = None,
        clients: Clients | None = None,
    ) -> list[Row]:
        """The rows of one entry (and of a held `waiting` it resolves). RecordError for a
        malformed entry; the mapper's state is unchanged then."""
        ts = entry_micros(entry.stream_id)
        kind = entry.fields.get("event")
        if not kind:
            raise RecordError("no event field")
        job_id = entry.fields.get("jobId")
        handler = _HANDLERS.get(kind)
        if handler is not None and not job_id:
            raise RecordError(f"{kind} entry without a jobId")
        rows: list[Row] = []
        pending = self._pending.pop(entry.queue, None)
        if pending is not None and pending.entry.stream_id == entry.stream_id:
            pending = None  # the held entry, read again from the stored id
        if pending is not None:
            if kind == "stalled" and job_id == pending.entry.fields.get("jobId"):
                return self._stalled(entry, ts, job_hash, clients)
            rows.extend(self._retried(pending))
        if handler is None:
            return rows
        rows.extend(handler(self, entry, ts, job_hash or {}, clients))
        return rows

    def settle(self, queue: str) -> list[Row]:
        """The stream was read to its end: a `waiting` still held was a retry (BullMQ
        writes a stall's `stalled` entry in the same script, right after it)."""
        pending = self._pending.pop(queue, None)
        return self._retried(pending) if pending is not None else []

    def held(self, queue: str) -> str | None:
        """The stream id of a `waiting` held for the next entry, if one is: a receiver
        that stops now must read it again."""
        pending = self._pending.get(queue)
        return pending.entry.stream_id if pending is not None else None

    def forget_runs(self, queue: str) -> None:
        """After a queue's entries were lost (a trimmed stream): none of its runs is
        known to be going on."""
        for (job_queue, _), job in self._jobs.items():
            if job_queue == queue:
                job.run = None
                job.stalled = None
        self._pending.pop(queue, None)

    # -- jobs and rows ----------------------------------------------------------------

    def _uid(self, entry: Entry, *extra: str) -> str:
        return content_uid(SOURCE, self.stream_name, self.prefix, entry.queue,
                           entry.stream_id, *extra)

    def _job(self, queue: str, bull_id: str) -> _Job:
        ident = (queue, bull_id)
        job = self._jobs.get(ident)
        if job is None:
            job = self._jobs[ident] = _Job(job_id=f"{queue}:{bull_id}")
            while len(self._jobs) > self._known_jobs:
                self._jobs.popitem(last=False)
        else:
            self._jobs.move_to_end(ident)
        return job

    def _learn(self, job: _Job, job_hash: Mapping[str, str | None]) -> dict[str, Any]:
        """Name and key from the job hash, where the job does not know them yet; the
        hash's counters, for attrs."""
        if job.name is None and job_hash.get("name"):
            job.name = job_hash["name"]
        data = self._data(job_hash.get("data"))
        if job.key is None:
            job.key = self._first(data, self._key_names) or job_hash.get("deid") or None
        return {
            "resource_key": self._first(data, self._resource_names),
            "bullmq.ats": _int(job_hash.get("ats")),
            "bullmq.atm": _int(job_hash.get("atm")),
            "bullmq.stc": _int(job_hash.get("stc")),
        }

    @staticmethod
    def _data(raw: str | None) -> dict[str, Any]:
        if not raw:
            return {}
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        if not isinstance(value, dict):
            return {}
        try:
            return flatten(value)
        except RecordError:
            return {}

    @staticmethod
    def _first(data: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
        for name in names:
            for spelled in (name, f"data.{name}"):
                value = data.get(spelled)
                if value is not None and value != "" and not isinstance(value, dict | list):
                    return str(value)
        return None

    def _row(
        self, entry: Entry, kind: str, ts: int, job: _Job | None, *,
        uid: str | None = None, run: _Run | None = None, worker: str | None = None,
        attempt: int | None = None, resource_key: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> Row:
        row: Row = {
            "event_uid": uid or self._uid(entry),
            "ts": ts,
            "event": kind,
            "job_id": job.job_id if job else None,
            "job_type": job.name if job else None,
            "idempotency_key": job.key if job else None,
            "queue": entry.queue,
            "worker_id": worker if worker is not None else (run.worker if run else None),
            "source": SOURCE,
            "attrs": _attrs({"bullmq.event": entry.fields.get("event"),
                             "bullmq.stream_id": entry.stream_id, **(attrs or {})}),
        }
        if run is not None:
            row["execution_id"] = run.deliver_uid
        if attempt is not None:
            row["delivery_attempt"] = attempt
        if resource_key is not None:
            row["resource_key"] = resource_key
        return row

    def _added(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
               clients: Clients | None) -> list[Row]:
        bull_id = entry.fields["jobId"]
        ident = (entry.queue, bull_id)
        earlier = self._jobs.pop(ident, None)
        job = self._job(entry.queue, bull_id)
        if earlier is not None and (earlier.saw_added or earlier.actives > 0):
            # The id was added again after its job was removed: a job of its own, under
            # the first one's key.
            job.job_id = f"{entry.queue}:{bull_id}@{entry.stream_id}"
            job.key = earlier.key or earlier.job_id
        job.saw_added = True
        job.name = entry.fields.get("name") or None
        extra = self._learn(job, job_hash)
        return [self._row(entry, "enqueue", ts, job, resource_key=extra.pop("resource_key"),
                          attrs={"bullmq.job_id": bull_id})]

    def _active(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                clients: Clients | None) -> list[Row]:
        bull_id = entry.fields["jobId"]
        job = self._job(entry.queue, bull_id)
        extra = self._learn(job, job_hash)
        job.actives += 1
        attempt = job.actives if job.saw_added else extra["bullmq.ats"]
        # The hash is read after the entry: where it counts more starts than this one,
        # a later run (a re-run on another worker) wrote its `pb`.
        worker = job_hash.get("pb") or None
        if worker and job.saw_added and extra["bullmq.ats"] != attempt:
            extra["bullmq.pb_of_a_later_run"] = worker
            worker = None
        fresh = self._fresh(entry, clients)
        holders = None
        if worker and fresh is not None:
            holders = frozenset(fresh.ids_by_name.get(
                worker_client_name(self.prefix, entry.queue, worker), frozenset()))
        uid = self._uid(entry)
        run = _Run(deliver_uid=uid, worker=worker, start_us=ts, holder_ids=holders)
        rows = [self._row(entry, "deliver", ts, job, uid=uid, run=run,
                          attempt=attempt if attempt and attempt >= 1 else None,
                          resource_key=extra.pop("resource_key"),
                          attrs={"bullmq.job_id": bull_id, **extra})]
        rows.extend(self._overlap(entry, ts, job, run, clients))
        job.run = run
        return rows

    def _overlap(self, entry: Entry, ts: int, job: _Job, rerun: _Run,
                 clients: Clients | None) -> list[Row]:
        """A re-run of a job whose earlier run stalled with its worker connected: if that
        worker is connected still, on another worker than the re-run, the stalled run
        went on after the re-run began."""
        if job.stalled is None:
            return []
        stalled, stall_stream_id, stall_ts = job.stalled
        job.stalled = None
        stall_entry = Entry(entry.queue, stall_stream_id, {"event": "stalled"})
        fresh = self._fresh(entry, clients)
        still = (
            fresh is not None and stalled.holder_ids is not None and stalled.worker
            and stalled.worker != rerun.worker
            and stalled.holder_ids & fresh.ids_by_name.get(
                worker_client_name(self.prefix, entry.queue, stalled.worker), frozenset())
        )
        attrs: dict[str, Any] = {"bullmq.stall": STALL, "bullmq.stalled_at_us": stall_ts}
        if still and fresh is not None:
            when = max(fresh.now_ms * 1000, ts + 1)
            attrs["bullmq.evidence"] = (
                f"worker {stalled.worker} still connected after the re-run began on "
                f"{rerun.worker}; the stalled run records no end of its own")
        else:
            when = stall_ts
            attrs["bullmq.evidence"] = "worker still connected at the stall"
        return [self._row(stall_entry, "lock_expired", when, job, run=stalled,
                          uid=self._uid(stall_entry, "stall"), attrs=attrs)]

    def _stalled(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None] | None,
                 clients: Clients | None) -> list[Row]:
        job = self._job(entry.queue, entry.fields["jobId"])
        self._learn(job, job_hash or {})
        run, job.run = job.run, None
        judgement, why = self._judge(entry, run, clients)
        attrs = {"bullmq.stall": judgement, "bullmq.evidence": why,
                 "bullmq.stc": _int((job_hash or {}).get("stc"))}
        if judgement == CRASH:
            attrs["reason"] = f"WorkerLost: {why}"
            attrs["settled_by"] = RECEIVER
            return [self._row(entry, "nack", ts, job, run=run, uid=self._uid(entry, "stall"),
                              attrs=attrs)]
        if judgement == STALL and run is not None:
            job.stalled = (run, entry.stream_id, ts)  # its row waits for the re-run
            return []
        return [self._row(entry, "lock_expired", ts, job, run=run,
                          uid=self._uid(entry, "stall"), attrs=attrs)]

    def _judge(self, entry: Entry, run: _Run | None,
               clients: Clients | None) -> tuple[str, str]:
        if run is None:
            return STALL_OR_CRASH, "the run's start was not seen"
        if not run.worker:
            return STALL_OR_CRASH, "the worker has no name (Worker option `name`)"
        if run.holder_ids is None:
            return STALL_OR_CRASH, f"worker {run.worker}'s connection was not seen"
        fresh = self._fresh(entry, clients)
        if fresh is None:
            return STALL_OR_CRASH, "the connections were not listed at the stall"
        if not run.holder_ids:
            return CRASH, (f"worker {run.worker}'s Redis connection had closed already when "
                           "its run was seen starting")
        name = worker_client_name(self.prefix, entry.queue, run.worker)
        if run.holder_ids & fresh.ids_by_name.get(name, frozenset()):
            return STALL, f"worker {run.worker}'s connection was still open at the stall"
        return CRASH, f"worker {run.worker}'s Redis connection closed before the stall"

    @staticmethod
    def _fresh(entry: Entry, clients: Clients | None) -> Clients | None:
        if clients is None:
            return None
        ms, _ = parse_stream_id(entry.stream_id)
        return clients if abs(clients.now_ms - ms) <= FRESH_MS else None

    def _completed(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                   clients: Clients | None) -> list[Row]:
        job = self._job(entry.queue, entry.fields["jobId"])
        self._learn(job, job_hash)
        run, job.run = job.run, None
        return [self._row(entry, "ack", ts, job, run=run, attrs={
            "bullmq.returnvalue": _cut(entry.fields.get("returnvalue"))})]

    def _failed(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                clients: Clients | None) -> list[Row]:
        job = self._job(entry.queue, entry.fields["jobId"])
        self._learn(job, job_hash)
        run, job.run = job.run, None
        # Failed without a re-run (stalled more often than maxStalledCount allows).
        rows = self._unrun_stall(entry, job)
        rows.append(self._row(entry, "fail", ts, job, run=run, attrs={
            "reason": _cut(entry.fields.get("failedReason"))}))
        return rows

    def _unrun_stall(self, entry: Entry, job: _Job) -> list[Row]:
        """The row of a stalled run whose job ends without running again."""
        if job.stalled is None:
            return []
        stalled, stall_stream_id, stall_ts = job.stalled
        job.stalled = None
        stall_entry = Entry(entry.queue, stall_stream_id, {"event": "stalled"})
        return [self._row(stall_entry, "lock_expired", stall_ts, job, run=stalled,
                          uid=self._uid(stall_entry, "stall"), attrs={
                              "bullmq.stall": STALL,
                              "bullmq.evidence": "worker still connected at the stall"})]

    def _waiting(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                 clients: Clients | None) -> list[Row]:
        if entry.fields.get("prev") == "active":
            self._pending[entry.queue] = _Pending(entry, ts, job_hash.get("failedReason"))
        return []

    def _retried(self, pending: _Pending) -> list[Row]:
        entry = pending.entry
        job = self._job(entry.queue, entry.fields["jobId"])
        run, job.run = job.run, None
        return [self._row(entry, "nack", pending.ts, job, run=run, attrs={
            "reason": _retry_reason(pending.failed_reason, "waiting again")})]

    def _delayed(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                 clients: Clients | None) -> list[Row]:
        job = self._job(entry.queue, entry.fields["jobId"])
        if job.run is None:
            return []  # added with a delay: not a settlement
        run, job.run = job.run, None
        return [self._row(entry, "nack", ts, job, run=run, attrs={
            "reason": _retry_reason(job_hash.get("failedReason"), "after a backoff"),
            "bullmq.delay_until": _int(entry.fields.get("delay"))})]

    def _lone_stalled(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                      clients: Clients | None) -> list[Row]:
        return self._stalled(entry, ts, job_hash, clients)

    def _deduped(self, entry: Entry, ts: int, job_hash: Mapping[str, str | None],
                 clients: Clients | None) -> list[Row]:
        job = self._job(entry.queue, entry.fields["jobId"])
        self._learn(job, job_hash)
        return [self._row(entry, "enqueue_deduped", ts, job, attrs={
            "bullmq.job_id": entry.fields["jobId"],
            "bullmq.deduplication_id": entry.fields.get("deduplicationId"),
            "bullmq.deduplicated_job_id": entry.fields.get("deduplicatedJobId"),
        })]


def _retry_reason(failed_reason: str | None, how: str) -> str:
    """A retried failure's reason: the job hash's failedReason, read when the entry is
    (a later failure of the job may have replaced it)."""
    said = f": {_cut(failed_reason)}" if failed_reason else ""
    return f"failed{said}; BullMQ retries it ({how})"


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


_HANDLERS = {
    "added": BullMQMapper._added,
    "active": BullMQMapper._active,
    "completed": BullMQMapper._completed,
    "failed": BullMQMapper._failed,
    "waiting": BullMQMapper._waiting,
    "delayed": BullMQMapper._delayed,
    "stalled": BullMQMapper._lone_stalled,
    "duplicated": BullMQMapper._deduped,
    "deduplicated": BullMQMapper._deduped,
}

#: The entries whose job hash is read (the others need nothing from it).
NEEDS_HASH = frozenset({"added", "active", "stalled", "duplicated", "deduplicated",
                        "completed", "failed", "waiting", "delayed"})

__all__ = [
    "CRASH", "Clients", "Entry", "BullMQMapper", "HASH_FIELDS", "NEEDS_HASH", "RECEIVER",
    "SOURCE", "STALL", "STALL_OR_CRASH", "entry_micros", "parse_stream_id", "previous_id",
    "worker_client_name",
]
