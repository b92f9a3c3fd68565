"""RQ's own state in Redis -> contract events, read-only, by polling (`collect --rq-redis`).

What RQ (2.x, 3.x) keeps, and what each poll reads of it:

- `rq:queues`: the queues' keys (`rq:queue:NAME`).
- `rq:wip:NAME`, the started registry: one member `JOB_ID:EXECUTION_ID` for each run in
  progress, scored by when its heartbeat lapses. A member not seen before is a `deliver`,
  dated by its `rq:execution:JOB_ID:EXECUTION_ID` hash (`created_at`, `worker_name`).
- `rq:results:JOB_ID`, a stream of a job's results (type 1 OK, 2 FAILED, 3 STOPPED, 4
  RETRIED, each naming its `execution_id`, `worker_name`, and when it started and ended).
  A run that left the started registry ends with its result: `ack`, `fail` (a failure
  naming `Work-horse terminated unexpectedly` is settled by the worker's main process on
  the horse's behalf, a lost worker), `fail` (stopped), or `nack` (RETRIED: the job
  returned `Retry`). A run that left with no result of its own was failed and requeued
  (an exception, or a killed work-horse, with retries left: RQ writes no result for
  those): a `nack`, dated by the job's `ended_at`.
- A run still in the started registry after its heartbeat lapsed, whose worker's key
  (`rq:worker:NAME`) is gone, was abandoned: its worker died with it. It gets a `nack`
  on its behalf (`settled_by` this reader, `reason` AbandonedJobError), which the queries
  read as a worker crash; RQ retries it (if it has retries left) once a worker cleans the
  registry.
- `rq:finished:NAME` and `rq:failed:NAME`: jobs finished or failed since the last poll;
  the results of runs too short to be seen in the started registry give their `deliver`
  (the execution's start) and their end.
- `rq:job:ID`: the job's `description` (`module.func('o-1', n=2)`), read as `job_type` and
  the arguments `rq.args.N` / `rq.kwargs.NAME` (a mapping file can name one as the
  idempotency key, as for RQ's logs), `origin`, `enqueued_at` (an `enqueue`).

Each row's uid is a hash of the job, the execution and the step: reading the same state
again (the next poll, a restart) gives the same rows, and the collector keeps one. The
runs in progress are kept in a state (`to_json`), saved once their rows are durable, so
a restarted reader still ends the runs that ended while it was away.

What polling cannot see: a failed run that started and was requeued between two polls
(it left no result and was never in the started registry): the job's later run reads as
its only one. Poll more often than jobs take (`--rq-interval`).
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from collectors.call_args import call_attrs, split_call
from collectors.normalise import Normaliser, RecordError, Row
from store.contract import content_uid

SOURCE = "rq-redis"
#: Who settles an abandoned run on its behalf (`settled_by`).
SETTLER = "dupescope rq-redis"
_RESULT_TYPES = {"1": "ack", "2": "fail", "3": "fail", "4": "nack"}
#: A job's `started_at` this far after a run's start is a later run's.
LATER_RUN_US = 250_000
#: Results taken by time (RQ before 2.9) remembered, the latest first to stay.
CONSUMED_KEPT = 10_000
_JOB_FIELDS = ("description", "origin", "enqueued_at", "created_at", "started_at",
               "ended_at", "status", "worker_name", "retries_left")


class RedisReads(Protocol):
    """The read-only commands this reader sends (a `redis.Redis` with
    `decode_responses=True` is one)."""

    def smembers(self, name: str) -> Any: ...
    def zrange(self, name: str, start: int, end: int, withscores: bool = False) -> Any: ...
    def zrangebyscore(self, name: str, min: Any, max: Any, withscores: bool = False) -> Any: ...
    def hgetall(self, name: str) -> Any: ...
    def hmget(self, name: str, keys: Any) -> Any: ...
    def xrange(self, name: str, min: str = "-", max: str = "+") -> Any: ...
    def exists(self, *names: str) -> Any: ...


@dataclass
class OpenRun:
    """A run seen in the started registry and not yet ended."""

    job_id: str
    execution: str
    queue: str
    worker: str
    started_us: int
    abandoned: bool = False
    seen_us: int = 0  # the last poll that saw it in progress


@dataclass
class PollState:
    """What the reader remembers between polls (saved with the rows' durability)."""

    open: dict[str, OpenRun] = field(default_factory=dict)  # by wip member
    #: Per finished/failed registry, the highest score read (their scores, whole seconds,
    #: grow with time) and the jobs read at that score.
    marks: dict[str, tuple[float, list[str]]] = field(default_factory=dict)
    #: Results that name no execution (RQ before 2.9), by stream id: the run each ended.
    consumed: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return orjson.dumps({
            "open": {m: vars(run) for m, run in self.open.items()},
            "marks": self.marks,
            "consumed": self.consumed,
        })

    @classmethod
    def from_json(cls, data: bytes) -> PollState:
        loaded = orjson.loads(data)
        return cls({m: OpenRun(**run) for m, run in loaded.get("open", {}).items()},
                   {k: (float(v[0]), list(v[1])) for k, v in loaded.get("marks", {}).items()},
                   dict(loaded.get("consumed", {})))


@dataclass
class Poll:
    rows: list[Row] = field(default_factory=list)
    rejected: int = 0


class RqRedisReader:
    """Turns what changed in RQ's Redis state since the last poll into rows."""

    def __init__(
        self, client: RedisReads, normaliser: Normaliser | None = None,
        state: PollState | None = None, *, prefix: str = "rq",
    ) -> None:
        self.client = client
        self.normaliser = normaliser or Normaliser()
        self.state = state or PollState()
        self.prefix = prefix
        self._jobs: dict[str, dict[str, str | None]] = {}  # read this poll

    def poll(self, now: float) -> Poll:
        """One look at every queue; `now` is the Redis server's time in seconds."""
        out = Poll()
        self._jobs = {}
        seen: set[str] = set()
        queues = self._queues()
        for queue in queues:
            for member, score in self.client.zrange(f"{self.prefix}:wip:{queue}", 0, -1,
                                                     withscores=True):
                seen.add(member)
                self._started(member, float(score), queue, now, out)
        for member in [m for m in self.state.open if m not in seen]:
            self._ended(self.state.open.pop(member), out)
        for queue in queues:  # after the endings: their results are theirs
            for registry in ("finished", "failed"):
                self._settled(f"{self.prefix}:{registry}:{queue}", queue, out)
        while len(self.state.consumed) > CONSUMED_KEPT:
            del self.state.consumed[next(iter(self.state.consumed))]
        return out

    # -- the started registry -------------------------------------------------------------

    def _queues(self) -> list[str]:
        lead = f"{self.prefix}:queue:"
        return sorted(q.removeprefix(lead) for q in self.client.smembers(f"{self.prefix}:queues"))

    def _started(self, member: str, score: float, queue: str, now: float, out: Poll) -> None:
        run = self.state.open.get(member)
        if run is not None:
            run.seen_us = round(now * 1e6)
        if run is None:
            job_id, _, execution = member.rpartition(":")
            if job_id:
                hash_ = self.client.hgetall(f"{self.prefix}:execution:{member}") or {}
                started = _float(hash_.get("created_at"))
            else:  # RQ before 2.3 registers the bare job id: the run is its start time
                job_id, hash_ = member, {}
                job_started = _iso_us(self._job(job_id).get("started_at"))
                started = job_started / 1e6 if job_started is not None else None
                execution = f"started-{job_started}"
            worker = hash_.get("worker_name") or self._job(job_id).get("worker_name") or ""
            if started is None:
                started = now
            run = OpenRun(job_id, execution, queue, worker, round(started * 1e6),
                          seen_us=round(now * 1e6))
            self.state.open[member] = run
            self._enqueued(job_id, out)
            self._emit(out, "deliver", run, run.started_us)
        if not run.abandoned and score < now and run.worker and not self.client.exists(
            f"{self.prefix}:worker:{run.worker}"
        ):
            run.abandoned = True
            self._emit(out, "nack", run, round(score * 1e6), reason=(
                f"AbandonedJobError: worker {run.worker} is gone and its run's heartbeat "
                "lapsed"), settled_by=SETTLER)

    def _ended(self, run: OpenRun, out: Poll) -> None:
        """A run that left the started registry: its result, else a requeue."""
        result = self._result(run)
        if result is not None:
            self._result_rows(run, result, out)
            return
        if run.abandoned:
            return  # settled on its behalf already
        if run.worker and not self.client.exists(f"{self.prefix}:worker:{run.worker}"):
            # RQ's cleanup took it from the registry before a poll saw its heartbeat lapse
            self._emit(out, "nack", run, self._left_at(run), reason=(
                f"AbandonedJobError: worker {run.worker} is gone"), settled_by=SETTLER)
            return
        self._emit(out, "nack", run, self._left_at(run), reason="ended without a result of "
                   "its own: failed (an exception, or its work-horse killed) and requeued for "
                   "a retry")

    def _left_at(self, run: OpenRun) -> int:
        """When a run that left no result ended: the job's `ended_at` where that is this
        run's (after it was last seen, before the job's next run started), else just
        before the next run, else when it was last seen."""
        nexts = [other.started_us for other in self.state.open.values()
                 if other.job_id == run.job_id and other.started_us > run.started_us]
        for _, result in self._results(run.job_id):
            started = _float(result.get("execution_started_at"))
            if started is not None and round(started * 1e6) > run.started_us:
                nexts.append(round(started * 1e6))
        bound = min(nexts) - 1 if nexts else None
        ended = _iso_us(self._job(run.job_id).get("ended_at"))
        if ended is not None and ended >= run.seen_us and (bound is None or ended <= bound):
            return ended
        if bound is not None:
            return max(bound, run.started_us)
        return max(run.seen_us, run.started_us)

    # -- finished and failed registries ---------------------------------------------------

    def _settled(self, registry: str, queue: str, out: Poll) -> None:
        """Results of runs never seen started (shorter than a poll)."""
        mark, at_mark = self.state.marks.get(registry, (float("-inf"), []))
        entries = self.client.zrangebyscore(registry, mark, "+inf", withscores=True)
        for job_id, score in entries:
            score = float(score)
            if score == mark and job_id in at_mark:
                continue  # read at an earlier poll: a score is a whole second
            if score > mark:
                mark, at_mark = score, []
            at_mark.append(job_id)
            self.state.marks[registry] = (mark, at_mark)
            for result_id, result in self._results(job_id):
                execution = result.get("execution_id") or result_id
                if f"{job_id}:{execution}" in self.state.open or (
                    result_id in self.state.consumed
                ) or (not result.get("execution_id") and any(
                    run.job_id == job_id for run in self.state.open.values()
                )):
                    continue  # a run seen in progress: `_ended` reads (or read) it
                started = _float(result.get("execution_started_at"))
                ts = round(started * 1e6) if started is not None else _stream_us(result_id)
                run = OpenRun(job_id, execution, queue, result.get("worker_name") or "", ts)
                self._enqueued(job_id, out)
                self._emit(out, "deliver", run, ts)
                self._result_rows(run, (result_id, result), out)

    # -- results --------------------------------------------------------------------------

    def _results(self, job_id: str) -> list[tuple[str, dict[str, str]]]:
        return list(self.client.xrange(f"{self.prefix}:results:{job_id}"))

    def _result(self, run: OpenRun) -> tuple[str, dict[str, str]] | None:
        """The result naming the run's execution; where results name none (RQ before
        2.9), the first one written after the run started, before the job's next run
        started (the job's `started_at` is its latest run's), that no other run took."""
        results = self._results(run.job_id)
        for result_id, result in results:
            if result.get("execution_id") == run.execution:
                return result_id, result
        latest = _iso_us(self._job(run.job_id).get("started_at"))
        before = latest if latest is not None and latest > run.started_us + LATER_RUN_US \
            else None
        for result_id, result in results:
            written = _stream_us(result_id)
            if (not result.get("execution_id") and result_id not in self.state.consumed
                    and written >= run.started_us - 1_000
                    and (before is None or written < before)):
                self.state.consumed[result_id] = run.execution
                return result_id, result
        return None

    def _result_rows(self, run: OpenRun, found: tuple[str, dict[str, str]], out: Poll) -> None:
        result_id, result = found
        kind = _RESULT_TYPES.get(str(result.get("type")), "fail")
        ended = _float(result.get("execution_ended_at"))
        ts = round(ended * 1e6) if ended is not None else _stream_us(result_id)
        extra: dict[str, Any] = {"rq.result_type": result.get("type")}
        exc = _exc_string(result.get("exc_string"))
        if result.get("type") == "4":
            extra["reason"] = "RETRIED: the job returned Retry"
        elif result.get("type") == "3":
            extra["reason"] = "stopped"
        elif exc:
            extra["reason"] = exc.strip().splitlines()[-1] if exc.strip() else exc
            if "Work-horse terminated unexpectedly" in exc:
                extra["settled_by"] = f"{run.worker} main process"
                kind = "nack"
        self._emit(out, kind, run, max(ts, run.started_us), **extra)

    # -- rows -----------------------------------------------------------------------------

    def _job(self, job_id: str) -> dict[str, str | None]:
        job = self._jobs.get(job_id)
        if job is None:
            values = self.client.hmget(f"{self.prefix}:job:{job_id}", list(_JOB_FIELDS))
            job = dict(zip(_JOB_FIELDS, values, strict=True))
            self._jobs[job_id] = job
        return job

    def _enqueued(self, job_id: str, out: Poll) -> None:
        job = self._job(job_id)
        ts = _iso_us(job.get("created_at")) or _iso_us(job.get("enqueued_at"))
        if ts is None:
            return
        flat = {"ts": ts, "event": "enqueue", "job_id": job_id, **self._job_fields(job_id)}
        self._normalise(out, flat, content_uid(SOURCE, job_id, "enqueue"), None)

    def _job_fields(self, job_id: str) -> dict[str, Any]:
        job = self._job(job_id)
        fields: dict[str, Any] = {}
        if job.get("origin"):
            fields["queue"] = job["origin"]
        description = job.get("description")
        if description:
            fields["rq.description"] = description
            call = split_call(description)
            if call is not None:
                fields["job_type"] = call[0]
                fields.update(call_attrs(call[1], "rq"))
        return fields

    def _emit(self, out: Poll, kind: str, run: OpenRun, ts: int, **attrs: Any) -> None:
        flat = {
            "ts": ts, "event": kind, "job_id": run.job_id, "queue": run.queue,
            "worker_id": run.worker or None, "rq.execution_id": run.execution,
            **self._job_fields(run.job_id), **attrs,
        }
        uid = content_uid(SOURCE, run.job_id, run.execution, kind)
        self._normalise(out, flat, uid, f"{SOURCE}:{run.job_id}:{run.execution}")

    def _normalise(self, out: Poll, flat: dict[str, Any], uid: str, execution: str | None
                   ) -> None:
        flat = {k: v for k, v in flat.items() if v is not None}
        try:
            row = self.normaliser.normalise(flat, uid=uid, source=SOURCE)
        except RecordError:
            out.rejected += 1
            return
        row["execution_id"] = execution
        out.rows.append(row)


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _iso_us(value: str | None) -> int | None:
    """RQ's `2026-12-05T07:57:20.073463Z` -> µs since the epoch."""
    if not value:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1e6)


def _stream_us(result_id: str) -> int:
    """A stream entry's id `1796457438383-0` -> its time in µs."""
    return int(result_id.split("-", 1)[0]) * 1000


def _exc_string(value: str | None) -> str | None:
    """RQ keeps a failure's traceback zlib-compressed, base64-encoded."""
    if not value:
        return None
    try:
        return zlib.decompress(base64.b64decode(value)).decode("utf-8", "replace")
    except (ValueError, zlib.error):
        return None
