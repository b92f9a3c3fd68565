"""Sidekiq's own logs -> contract events, with no change to the workers.

What a Sidekiq process (6.4, read from its source and its processes; 7 and 8 use the same
formatters) logs at INFO, in its default
format (`Sidekiq::Logger::Formatters::Pretty`):

    2026-12-05T08:00:45.240Z pid=20902 tid=gs6 class=ChargeJob jid=9c00d0... INFO: start
    2026-12-05T08:00:45.245Z pid=20902 tid=gs6 class=ChargeJob jid=9c00d0... elapsed=0.005
        INFO: fail                                              (one line in the log)
    2026-12-05T08:00:45.245Z pid=20902 tid=gs6 WARN: {"context":"Job raised exception",
        "job":{"retry":3,"queue":"q","class":"ChargeJob","args":["k2"],"jid":"9c00d0...",
        "enqueued_at":...},"jobstr":"..."}                      (one line in the log)
    2026-12-05T08:00:45.245Z pid=20902 tid=gs6 WARN: RuntimeError: card declined
    ... pid=20903 tid=gvz WARN: Work still in progress [#<struct ...UnitOfWork ... job="{...}">]
    ... pid=20903 tid=gvz INFO: Pushed 2 jobs back to Redis

and in its JSON format (`Sidekiq::Logger::Formatters::JSON`) the same, one object a line:
`{"ts":...,"pid":...,"tid":...,"lvl":"INFO","msg":"start","ctx":{"class":...,"jid":...}}`.
A line is read in either format whatever the lines around it (a process logs its first
line before its configuration chooses JSON). Some builds put the level first
(`INFO 2026-... pid=...`): that is read too. Where Sidekiq writes no time of its own
(`DYNO` set: `Formatters::WithoutTimestamp`), Heroku's log drain puts its own before the
line (`2026-12-05T08:00:45.240000+00:00 app[worker.1]: pid=4 tid=...`): read too.

What each line becomes:
- `start` is a `deliver`: the jid is the job_id, the class the job_type, the worker
  `<host>:<pid>`; `delivery_attempt` counts the starts of that jid in this log.
- `done` is an `ack` of the run its thread (`tid`) started.
- `fail` ends the run: the `Job raised exception` (or `Internal exception!`) entry the same
  thread logs next carries the job's payload, and becomes the run's `nack` (Sidekiq puts
  it in its retry set) or `fail` (`retry: false`, or `Adding dead` logged before: the dead
  set), with `sidekiq.retry_count` (absent on a first run), `sidekiq.elapsed_s` and the
  args as `sidekiq.args.0`, `sidekiq.args.1`... for a mapping file to name a key.
- At shutdown, Sidekiq's BasicFetch pushes the jobs still running back onto their queue
  (`Work still in progress [...]` names them, `Pushed N jobs back to Redis` confirms): each
  becomes a `nack` of its run settled by the process on the worker's behalf
  (`settled_by` `<worker> shutdown`, reason `pushed back to Redis at shutdown`). The job
  runs again from its start, so its next run reads as `worker_crash`, as after any lost
  worker. The `fail` its killed thread logs afterwards is no failure of the job and adds
  no row.
Other lines (boot, other loggers, backtraces, Ruby warnings on stderr) are counted as
ignored. A line that starts like a Sidekiq line (a time and `pid=`, or a JSON object with
`ts`) but cannot be read, or a `start`/`done`/`fail` without its jid, is rejected with
file:line and why, and the rest is kept.

Each row's uid is the XXH3 hash of its line (`uids.py`; a push-back's rows add the jid),
so reading a log again stores nothing twice.
"""

from __future__ import annotations

import copy
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser, RecordError, flatten
from collectors.timestamps import MICROS_RANGE
from collectors.worker_log_reader import WorkerLogReader

SIDEKIQ_LOG = "sidekiq-log"  # the name of the format in `--format`

_LEVELS = "DEBUG|INFO|WARN|ERROR|FATAL|UNKNOWN|ANY"
_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})"
_PRETTY = re.compile(
    rf"(?:(?P<lead>{_LEVELS}) )?(?P<ts>{_TIME}) (?:\S+\[[^\]\s]*\]: )?"
    rf"pid=(?P<pid>\d+) tid=(?P<tid>\S+)"
    rf"(?P<ctx>.*?) (?P<lvl>{_LEVELS}): (?P<msg>.*)"
)
# What looks like a Sidekiq line, to tell a damaged one (rejected) from other output.
_PRETTY_LIKE = re.compile(
    rf"(?:(?:{_LEVELS}) )?\d{{4}}-\d\d-\d\dT\S* (?:\S+\[[^\]\s]*\]: )?pid="
)
_CONTEXT = re.compile(r"(?:^| )(?P<key>[A-Za-z_]\w*)=(?P<value>\S*)")
_PUSHED = re.compile(r"Pushed (?P<count>\d+) jobs back to Redis")
_IN_PROGRESS = "Work still in progress "
_DEAD = re.compile(r"Adding dead (?P<cls>\S+) job (?P<jid>\S+)")
_UNIT = re.compile(r'job="(?P<job>(?:[^"\\]|\\.)*)"')
_JID_IN_TEXT = re.compile(r'jid\\*":\\*"(?P<jid>[0-9A-Za-z_-]+)')
_EXCEPTION_CONTEXTS = ("Job raised exception", "Internal exception!")
_JOB_STEPS = ("start", "done", "fail")
#: The most of a message kept in a row's attrs, as text.
MAX_ARGS_TEXT = 4_096
#: How many jids' start counts a reader remembers (the latest): a tail runs for months.
REMEMBERED_JIDS = 100_000


@dataclass(frozen=True)
class SidekiqLogOptions:
    """What Sidekiq's lines do not say: the host (its lines carry only the pid)."""

    hostname: str | None = None


@dataclass
class _Line:
    """One Sidekiq line, in either format."""

    number: int
    raw: bytes
    ts: int
    pid: int
    tid: str
    level: str
    ctx: dict[str, Any]
    msg: str


@dataclass
class _Run:
    uid_source: bytes  # the deliver's line: its uid names the execution
    job_id: str
    job_type: str | None
    attempt: int
    worker: str
    elapsed: float | None = None  # from its `fail` line, awaiting the exception entry
    failed: bool = False
    pushed_back: bool = False


@dataclass
class _State:
    """What one log has said so far that later lines need."""

    starts: OrderedDict[str, int] = field(default_factory=OrderedDict)  # jid -> starts
    runs: dict[tuple[int, str], _Run] = field(default_factory=dict)  # (pid, tid) -> open run
    in_progress: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)


@dataclass
class _Out:
    """A row waiting for the uids of its line and of its execution's deliver."""

    number: int
    uid_source: bytes
    execution_source: bytes | None
    flat: dict[str, Any]


def parse_line(text: str) -> dict[str, Any] | None:
    """The fields of a Sidekiq line (ts, pid, tid, lvl, msg, ctx), None for a line that is
    not one. ValueError for one that starts like one and cannot be read."""
    if text.startswith("{"):
        if not text.startswith('{"ts"'):
            return None
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"a Sidekiq JSON line that is no JSON: {exc}") from exc
        if not isinstance(record, dict):
            return None
        missing = [k for k in ("ts", "pid", "tid", "lvl", "msg") if k not in record]
        if missing:
            raise ValueError("a Sidekiq JSON line without " + ", ".join(missing))
        ctx = record.get("ctx") or {}
        if not isinstance(ctx, dict):
            raise ValueError("a Sidekiq JSON line whose ctx is no object")
        return {"ts": record["ts"], "pid": record["pid"], "tid": record["tid"],
                "lvl": record["lvl"], "msg": record["msg"], "ctx": ctx}
    found = _PRETTY.fullmatch(text)
    if found is None:
        if _PRETTY_LIKE.match(text):
            raise ValueError("a Sidekiq line without pid=, tid= and LEVEL: message")
        return None
    ctx = {m["key"]: m["value"] for m in _CONTEXT.finditer(found["ctx"])}
    return {"ts": found["ts"], "pid": found["pid"], "tid": found["tid"],
            "lvl": found["lvl"], "msg": found["msg"], "ctx": ctx}


def looks_like_sidekiq_log(head: bytes) -> bool:
    """True when a line among the first of a file is Sidekiq's (either format)."""
    for raw in head.splitlines()[:200]:
        try:
            if parse_line(raw.decode("utf-8", "replace").strip()) is not None:
                return True
        except ValueError:
            continue
    return False


def _micros(text: Any) -> int:
    if not isinstance(text, str) or not re.fullmatch(_TIME, text):
        raise ValueError(f"time {text!r} is not ISO 8601 with a zone")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"time {text!r} is not a date: {exc}") from exc
    micros = round(moment.timestamp() * 1_000_000)
    if not MICROS_RANGE[0] <= micros <= MICROS_RANGE[1]:
        raise ValueError(f"time {text!r} out of range")
    return micros


def _job_from_text(text: str) -> dict[str, Any] | None:
    """A job payload written as JSON inside Ruby's inspect of a string, if it reads."""
    try:
        value = orjson.loads(orjson.loads(f'"{text}"'))
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _args_fields(args: Any) -> dict[str, Any]:
    """A job's args as `sidekiq.args.N` (objects inside flattened: `sidekiq.args.0.id`)."""
    if not isinstance(args, list):
        return {}
    try:
        fields = flatten({str(i): value for i, value in enumerate(args)}, "sidekiq.args.")
    except RecordError:
        return {}
    return {k: v for k, v in fields.items() if not isinstance(v, dict | list)}


class SidekiqLogReader(WorkerLogReader[_State]):
    """Reads one Sidekiq log in order, chunk after chunk, keeping what later lines need.

    One reader per file (or per tailed path). `checkpoint`/`restore` let a caller take a
    chunk back when its rows could not be stored, to read it again later.
    """

    def __init__(
        self,
        normaliser: Normaliser | None = None,
        options: SidekiqLogOptions | None = None,
        *,
        name: str = "",
    ) -> None:
        """`name`: where the log comes from; its file name stands for the host, which
        Sidekiq's lines do not name (rotation suffixes `.1`, `.gz` left out)."""
        self.normaliser = normaliser or Normaliser()
        self.options = options or SidekiqLogOptions()
        base = Path(name.removeprefix("tail:")).name
        self.host = self.options.hostname or re.sub(r"(\.\d+)?(\.gz)?$", "", base) or "sidekiq"
        self.state = _State()

    def checkpoint(self) -> _State:
        state = self.state
        return _State(OrderedDict(state.starts),
                      {key: copy.copy(run) for key, run in state.runs.items()},
                      copy.deepcopy(state.in_progress), set(state.dead))

    def decode(self, block: bytes, first_line: int, source: str) -> Decoded:
        """Rows of the lines in `block` (numbered from `first_line`), in line order."""
        from collectors.uids import line_uids  # here: it brings polars

        out = Decoded()
        pending: list[_Out] = []
        pieces = block.split(b"\n")
        if pieces and not pieces[-1]:
            pieces.pop()
        for number, raw in enumerate(pieces, start=first_line):
            text = raw.decode("utf-8", "replace").strip()
            try:
                fields = parse_line(text)
                line = None if fields is None else self._line(number, raw.strip(), fields)
            except ValueError as exc:
                out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                continue
            if line is None:
                out.ignored += bool(text)
                continue
            made = self._read(line, source, out)
            if made is None:
                out.ignored += 1
            else:
                pending.extend(made)
        sources = list({p.uid_source for p in pending} | {
            p.execution_source for p in pending if p.execution_source is not None})
        uids = dict(zip(sources, line_uids(sources), strict=True))
        for item in pending:
            try:
                row = self.normaliser.normalise(
                    item.flat, uid=uids[item.uid_source], source=source
                )
            except RecordError as exc:
                out.rejected.append(Rejected(f"{source}:{item.number}", str(exc)))
                continue
            row["execution_id"] = (
                uids[item.execution_source] if item.execution_source is not None else None
            )
            out.rows.append(row)
        return out

    # -- reading lines -------------------------------------------------------------------

    def _line(self, number: int, raw: bytes, fields: dict[str, Any]) -> _Line:
        try:
            pid = int(fields["pid"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"pid {fields['pid']!r} is no number") from exc
        ctx = fields["ctx"]
        msg = fields["msg"] if isinstance(fields["msg"], str) else str(fields["msg"])
        line = _Line(number, raw, _micros(fields["ts"]), pid, str(fields["tid"]),
                     str(fields["lvl"]), ctx, msg)
        if msg in _JOB_STEPS and ("jid" in ctx or "class" in ctx) and not ctx.get("jid"):
            raise ValueError(f"a job's {msg!r} line without its jid")
        return line

    def _worker(self, pid: int) -> str:
        return f"{self.host}:{pid}"

    def _read(self, line: _Line, source: str, out: Decoded) -> list[_Out] | None:
        """The rows one line makes; None for a line that is no lifecycle step."""
        ctx, msg = line.ctx, line.msg
        jid = ctx.get("jid")
        if msg in _JOB_STEPS and jid:
            return self._job_step(line, str(jid), ctx)
        if msg.startswith("{") and '"context"' in msg:
            return self._exception(line)
        if msg.startswith(_IN_PROGRESS):
            jobs: dict[str, dict[str, Any]] = {}
            for unit in _UNIT.finditer(msg):
                job = _job_from_text(unit["job"])
                if job is not None and job.get("jid"):
                    jobs[str(job["jid"])] = job
            for found in _JID_IN_TEXT.finditer(msg):
                jobs.setdefault(found["jid"], {})
            self.state.in_progress[line.pid] = jobs
            return None
        pushed = _PUSHED.fullmatch(msg)
        if pushed:
            return self._pushed_back(line)
        dead = _DEAD.fullmatch(msg)
        if dead:
            self.state.dead.add(dead["jid"])
        return None

    def _base(self, line: _Line, kind: str, run: _Run | None, job_id: str) -> dict[str, Any]:
        flat: dict[str, Any] = {
            "ts": line.ts,
            "event": kind,
            "job_id": job_id,
            "worker_id": self._worker(line.pid),
            "message": line.msg[:MAX_ARGS_TEXT],
            "sidekiq.level": line.level,
            "sidekiq.pid": line.pid,
            "sidekiq.tid": line.tid,
        }
        if run is not None:
            flat["delivery_attempt"] = run.attempt
            if run.job_type:
                flat["job_type"] = run.job_type
        return flat

    def _job_step(self, line: _Line, jid: str, ctx: dict[str, Any]) -> list[_Out] | None:
        key = (line.pid, line.tid)
        job_type = str(ctx["class"]) if ctx.get("class") else None
        if line.msg == "start":
            starts = self.state.starts
            attempt = starts.pop(jid, 0) + 1
            starts[jid] = attempt  # the latest last
            if len(starts) > REMEMBERED_JIDS:
                starts.popitem(last=False)
            run = _Run(line.raw, jid, job_type, attempt, self._worker(line.pid))
            self.state.runs[key] = run
            return [_Out(line.number, line.raw, line.raw, self._base(line, "deliver", run, jid))]
        run = self.state.runs.get(key)
        if run is not None and run.job_id != jid:
            run = None  # a line of a run this log did not show starting
        elapsed = _elapsed(ctx.get("elapsed"))
        if line.msg == "done":
            if run is not None:
                del self.state.runs[key]
            flat = self._base(line, "ack", run, jid)
            if job_type and "job_type" not in flat:
                flat["job_type"] = job_type
            if elapsed is not None:
                flat["sidekiq.elapsed_s"] = elapsed
            source = run.uid_source if run is not None else None
            return [_Out(line.number, line.raw, source, flat)]
        # `fail`: the exception entry that follows says how; a pushed-back run is settled.
        if run is None:
            return None
        if run.pushed_back:
            del self.state.runs[key]
            return None
        run.failed, run.elapsed = True, elapsed
        return None

    def _exception(self, line: _Line) -> list[_Out] | None:
        try:
            entry = orjson.loads(line.msg)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(entry, dict) or entry.get("context") not in _EXCEPTION_CONTEXTS:
            return None
        job = entry.get("job")
        if not isinstance(job, dict) or not job.get("jid"):
            return None
        jid = str(job["jid"])
        key = (line.pid, line.tid)
        run = self.state.runs.get(key)
        if run is not None and run.job_id == jid:
            del self.state.runs[key]
        else:
            run = None
        dead = jid in self.state.dead
        self.state.dead.discard(jid)
        # An internal exception got past Sidekiq's retry handling: no retry is scheduled.
        internal = entry["context"] != "Job raised exception"
        terminal = dead or internal or job.get("retry") in (False, 0)
        flat = self._base(line, "fail" if terminal else "nack", run, jid)
        flat["message"] = entry["context"]  # the payload is kept field by field below
        flat["reason"] = entry["context"] + (
            ": retries exhausted, moved to the dead set" if dead
            else ": not retried" if terminal else ": retried from the retry set"
        )
        if "job_type" not in flat and job.get("class"):
            flat["job_type"] = str(job["class"])
        flat.update(_job_fields(job))
        if run is not None and run.elapsed is not None:
            flat["sidekiq.elapsed_s"] = run.elapsed
        source = run.uid_source if run is not None else None
        return [_Out(line.number, line.raw, source, flat)]

    def _pushed_back(self, line: _Line) -> list[_Out] | None:
        named = self.state.in_progress.pop(line.pid, None)
        rows = []
        for (pid, _tid), run in sorted(self.state.runs.items(), key=lambda item: item[0][1]):
            if pid != line.pid or run.pushed_back or run.failed:
                continue
            if named is not None and run.job_id not in named:
                continue
            run.pushed_back = True
            flat = self._base(line, "nack", run, run.job_id)
            flat["reason"] = "pushed back to Redis at shutdown"
            flat["settled_by"] = f"{self._worker(line.pid)} shutdown"
            flat.update(_job_fields((named or {}).get(run.job_id, {})))
            rows.append(_Out(line.number, line.raw + b"\x00" + run.job_id.encode(),
                             run.uid_source, flat))
        return rows or None


def _elapsed(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _job_fields(job: dict[str, Any]) -> dict[str, Any]:
    """What a job's payload adds to a row: its queue, retry count, times and args."""
    fields: dict[str, Any] = {}
    if job.get("queue"):
        fields["queue"] = str(job["queue"])
    for name in ("retry_count", "error_class", "enqueued_at", "created_at", "failed_at"):
        if job.get(name) is not None:
            fields[f"sidekiq.{name}"] = job[name]
    fields.update(_args_fields(job.get("args")))
    return fields

