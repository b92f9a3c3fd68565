"""Celery's plain worker logs -> contract events, with no change to the workers.

What a Celery prefork worker writes at INFO, in its default formats
(`[%(asctime)s: %(levelname)s/%(processName)s] %(message)s`, and for a task's own logger
`... %(task_name)s[%(task_id)s]: %(message)s`):

    [2026-12-01 20:16:32,454: INFO/MainProcess] Task app.charge[3f1c...] received
    [2026-12-01 20:16:32,466: INFO/ForkPoolWorker-2] Task app.charge[3f1c...] succeeded
        in 0.0007s: 2                                   (one line in the log)
    [... INFO/ForkPoolWorker-1] Task app.sync[77aa...] retry: Retry in 1s: ...
    [... ERROR/ForkPoolWorker-2] Task app.parse[3479...] raised unexpected: ValueError(...)
    Traceback (most recent call last): ...   <- the failure's own lines, not records
    [... ERROR/MainProcess] Process 'ForkPoolWorker-2' pid:10853 exited with 'signal 9 ...'
    [... ERROR/MainProcess] Task handler raised error: WorkerLostError('Worker exited
        prematurely: signal 9 (SIGKILL) Job: 3.')

`received` (and Celery 3/4's `Received task: name[id]`) is a `deliver`, a success an
`ack`, a retry a `nack` with its `reason`, a failure a `fail`, and a pool process lost
under a task a `nack` whose reason names `WorkerLostError`, settled by the main process.
The task id in brackets is the job_id, the task name the job_type. Other lines (the
banner, other loggers) are counted as ignored; a line that starts like a task line but
cannot be read is rejected with file:line and why.

Celery logs carry no delivery count, so every `received` starts an execution, and this
reader says which execution each later line ends (`execution_id`, the `deliver`'s
event_uid), so that two runs of one task id on one worker stay apart:
- a success line gives its runtime: it ends the run received last before that run began;
- any other end line ends the run its pool process is known to run (from the task's own
  log lines, `name[id]: ...` in the task format, or `Task accepted: name[id] pid:N` where
  Celery logs it), else the run of its task id received last before it;
- Celery's WorkerLostError line names no task id: the task is the one the dead process is
  known to run; else, of the runs open on that worker, those whose end a live process
  logs further on in the same read are ruled out, and the only one left (or the oldest)
  is taken (`celery.attribution` says which). A tail waits at such a line for the lines
  that rule runs out (`decode_growing`). A task that logs one line of its own through
  Celery's task logger makes this exact.
Lines whose run is not known (a tail resumed after a restart) carry no execution_id, and
the queries place them by job_id and worker as for any log.

The worker (`worker_id`) is the node, as Celery names it (`celery@web-1`): all its pool
processes share it, so a run's lines from MainProcess and ForkPoolWorker-N meet, and the
process is kept in attrs (`celery.process`, `celery.pid`). It comes from
`--celery-hostname`, else the node's `... ready.` line or banner, else the log file's name.
Timestamps are Celery's local time without an offset: UTC unless a zone is given.

Each event's uid is the XXH3 hash of its line (`uids.py`), as for JSON lines: reading a
file again, or a tail reading it again, stores nothing twice.

This reader is the source's decoder (`celery-log` in `text`, collectors/decoders/
celery_log.py): `ingest` reads a log block after block with one reader, and the tail keeps
one per path across its reads.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser, RecordError, Row
from collectors.timestamps import MICROS_RANGE
from collectors.worker_log_reader import WorkerLogReader

CELERY_LOG = "celery-log"  # the name of the format in `--format`
#: How far a success line's start (its time less its runtime) may fall before the
#: `received` of its run: both are truncated to milliseconds.
START_SLACK_US = 2_000
#: The most of a traceback kept in a failure's attrs.
MAX_TRACEBACK = 8_192
#: How long, at most, a tail waits at a WorkerLostError that several open runs could be
#: behind, for the lines that rule some out (a live process ending its run).
HOLD_SECONDS = 10.0

#: Celery's default `worker_log_format` (its `worker_task_log_format` starts alike).
DEFAULT_LOG_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
_FIELD = re.compile(r"%\((?P<name>\w+)\)(?P<spec>[-#0 +]*\d*(?:\.\d+)?)[sdifr]")
# What each LogRecord field of a format is read as; the time is checked apart, so that a
# task line with a bad time is rejected rather than passed over.
_FIELD_PATTERNS = {
    "asctime": r"(?P<ts>.+?)",
    "levelname": r"(?P<level>[A-Za-z]+)",
    "processName": r"(?P<process>.+?)",
    "process": r"(?P<pid>\d+)",
    "message": r"(?P<message>.*)",
}


def compile_log_format(fmt: str) -> re.Pattern[str]:
    """A `logging` format string (Celery's `worker_log_format`) -> a regular expression
    for the lines it writes. ValueError for one without %(asctime)s and %(message)s."""
    parts, seen, at = [], set(), 0
    for field_ in _FIELD.finditer(fmt):
        parts.append(re.escape(fmt[at : field_.start()].replace("%%", "%")))
        name = field_["name"]
        pattern = _FIELD_PATTERNS.get(name, r".*?") if name not in seen else r".*?"
        parts.append(rf"\s*{pattern}\s*" if field_["spec"] else pattern)
        seen.add(name)
        at = field_.end()
    parts.append(re.escape(fmt[at:].replace("%%", "%")))
    missing = [name for name in ("asctime", "message") if name not in seen]
    if missing:
        raise ValueError(f"log format {fmt!r} has no " + " nor ".join(f"%({n})s" for n in missing))
    return re.compile("".join(parts))


_HEADER = compile_log_format(DEFAULT_LOG_FORMAT)
_CELERY_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:,\d{1,6})?")
_TASKISH = re.compile(r"(?:Task (?!handler |accepted: )\S*\[|Received task: )")
_TASK = re.compile(r"Task (?P<name>[^\s\[\]]+)\[(?P<id>[^\[\]\s]+)\](?: (?P<rest>.*))?")
_OLD_RECEIVED = re.compile(r"Received task: (?P<name>[^\s\[\]]+)\[(?P<id>[^\[\]\s]+)\](?P<rest>.*)")
_SUCCEEDED = re.compile(r"succeeded in (?P<runtime>\S*?)s: (?P<result>.*)")
_LOST_AFTER_SUCCESS = re.compile(r"succeeded before the worker was lost: (?P<exc>.*)")
_RETRY = re.compile(r"retry: (?P<reason>.*)")
_FAILED = re.compile(r"(?:raised (?:unexpected|exception)|INTERNAL ERROR): (?P<exc>.*)")
_ACCEPTED = re.compile(
    r"Task accepted: (?P<name>[^\s\[\]]+)\[(?P<id>[^\[\]\s]+)\] pid:(?P<pid>\d+)"
)
_EXITED = re.compile(r"Process '(?P<process>[^']+)' pid:(?P<pid>\d+) exited with '(?P<how>[^']*)'")
_HANDLER_ERROR = re.compile(r"Task handler raised error: (?P<exc>.*)")
_TASK_LOGGER = re.compile(r"(?P<name>[\w.:-]+)\[(?P<id>[0-9A-Za-z-]{8,})\]: ")
_READY = re.compile(r"(?P<node>\S+@\S+) ready\.")
_BANNER = re.compile(r" *-+ (?P<node>\S+@\S+) v\d")


@dataclass(frozen=True)
class CeleryLogOptions:
    """What the logs do not say: the worker's node name, the zone of its clock, and the
    format of its lines where it is not Celery's default."""

    hostname: str | None = None
    zone: tzinfo = UTC
    log_format: str = DEFAULT_LOG_FORMAT

    @classmethod
    def from_flags(
        cls, hostname: str | None, zone: str | None, log_format: str | None = None
    ) -> CeleryLogOptions:
        """From `--celery-hostname`, `--celery-timezone` and `--celery-log-format`;
        ValueError for a bad zone or format."""
        fmt = log_format or DEFAULT_LOG_FORMAT
        compile_log_format(fmt)
        return cls(hostname or None, parse_zone(zone) if zone else UTC, fmt)

    def header(self) -> re.Pattern[str]:
        return _HEADER if self.log_format == DEFAULT_LOG_FORMAT else compile_log_format(
            self.log_format
        )


def parse_zone(text: str) -> tzinfo:
    """An IANA zone name (Europe/Berlin) or a fixed offset (+02:00, -0530, Z)."""
    offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", text.strip())
    if offset:
        sign = 1 if offset.group(1) == "+" else -1
        delta = timedelta(hours=int(offset.group(2)), minutes=int(offset.group(3)))
        return timezone(sign * delta)
    if text.strip().upper() in ("Z", "UTC"):
        return UTC
    try:
        return ZoneInfo(text.strip())
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {text!r} (an IANA name or +HH:MM)") from exc


def sniff_format(head: bytes, options: CeleryLogOptions | None = None) -> str | None:
    """`celery-log` when the first lines of a file are a Celery worker's (a `[time:
    LEVEL/process]` line, in the format of `options`, or the worker's banner before any
    JSON line), `json-lines` when a JSON line comes first, None while neither has shown."""
    expression = options.header() if options else _HEADER
    for raw in head.splitlines()[:200]:
        line = raw.decode("utf-8", "replace").rstrip()
        if line.lstrip().startswith("{"):
            return "json-lines"
        header = expression.fullmatch(line)
        if (header and _CELERY_TIME.fullmatch(header["ts"])) or _BANNER.match(line):
            return CELERY_LOG
    return None


def looks_like_celery_log(head: bytes, options: CeleryLogOptions | None = None) -> bool:
    return sniff_format(head, options) == CELERY_LOG


@dataclass
class _Run:
    """One execution that has been received and not yet ended."""

    uid: str
    ts: int
    job_id: str
    job_type: str | None
    worker: str
    process: str | None = None  # the pool process known to run it


@dataclass
class _Lost:
    process: str
    pid: int
    how: str
    run: _Run | None


@dataclass
class _State:
    """What one log has said so far that later lines need; small, copied per chunk."""

    host: str | None = None
    main_pid: int | None = None  # where the log format says it
    runs: dict[tuple[str, str], list[_Run]] = field(default_factory=dict)
    by_process: dict[tuple[str, str], _Run] = field(default_factory=dict)
    by_pid: dict[tuple[str, int], _Run] = field(default_factory=dict)
    lost: dict[str, _Lost] = field(default_factory=dict)


@dataclass
class _Event:
    """A line that is an event, before its uid is known and its traceback is read."""

    number: int
    line: bytes
    ts: int
    level: str
    process: str
    message: str
    kind: str  # deliver, ack, nack, fail, lost
    job_id: str | None = None
    job_type: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    traceback: list[str] | None = None


@dataclass
class _Note:
    """A line that is no event but tells which process runs what, or who the worker is."""

    number: int
    ts: int
    process: str
    kind: str  # accepted, task_log, exited, ready, pid
    job_id: str = ""
    pid: int = 0
    how: str = ""
    node: str = ""


class CeleryLogReader(WorkerLogReader[_State]):
    """Reads one Celery log in order, chunk after chunk, keeping what later lines need.

    One reader per file (or per tailed path, across its rotations). A chunk ends at a line
    end; `checkpoint`/`restore` let a caller take a chunk back when its rows could not be
    stored, to read it again later.
    """

    def __init__(
        self,
        normaliser: Normaliser | None = None,
        options: CeleryLogOptions | None = None,
        *,
        name: str = "",
    ) -> None:
        """`name`: where the log comes from; its last part names a worker the log does
        not name (when no hostname is given either)."""
        self.normaliser = normaliser or Normaliser()
        self.options = options or CeleryLogOptions()
        self.fallback_host = Path(name.removeprefix("tail:")).name or "celery"
        self.state = _State()
        self._header = self.options.header()
        lead = self.options.log_format.split("%(", 1)[0].replace("%%", "%")
        self._lead = lead[:1]  # what every line in the format starts with, if anything
        self._ambiguous: tuple[int, bytes] | None = None  # the first unsure WorkerLostError
        self._held: tuple[bytes, float] | None = None  # the line a tail waits at, since

    def prime(self, block: bytes) -> None:
        """Learn what lines read before said (the worker's name, the runs still open),
        storing nothing: for a reader that resumes in the middle of a log."""
        self.decode(block, 1, "")

    def decode_growing(
        self, block: bytes, first_line: int, source: str, now: float | None = None
    ) -> tuple[Decoded, int]:
        """For a log still being written (a tail): as `decode`, but it stops before a
        WorkerLostError that several open runs could be behind while the lines that may
        rule some out can still come (up to HOLD_SECONDS from the first look at it).
        Returns the rows and how many bytes of `block` it read."""
        now = time.monotonic() if now is None else now
        before = self.checkpoint()
        out = self.decode(block, first_line, source)
        if self._ambiguous is None:
            self._held = None
            return out, len(block)
        number, line = self._ambiguous
        if self._held is None or self._held[0] != line:
            self._held = (line, now)
        if now - self._held[1] >= HOLD_SECONDS:
            self._held = None
            return out, len(block)
        self.restore(before)
        cut = sum(len(piece) + 1 for piece in block.split(b"\n")[: number - first_line])
        return self.decode(block[:cut], first_line, source), cut

    def decode(self, block: bytes, first_line: int, source: str) -> Decoded:
        """Rows of the lines in `block` (numbered from `first_line`), in line order."""
        from collectors.uids import line_uids  # here: it brings polars

        out = Decoded()
        self._ambiguous = None
        items = list(self._parse(block, first_line, source, out))
        events = [item for item in items if isinstance(item, _Event)]
        uids = iter(line_uids([event.line for event in events]))
        for at, item in enumerate(items):
            if isinstance(item, _Note):
                self._note(item)
                continue
            row = self._event(item, next(uids), source, out, items, at)
            if row is not None:
                out.rows.append(row)
        return out

    # -- reading lines -------------------------------------------------------------------

    def _parse(
        self, block: bytes, first_line: int, source: str, out: Decoded
    ) -> Iterator[_Event | _Note]:
        """Each line once: an event, a note, part of the record above it, or ignored."""
        record: _Event | None = None  # the event whose own lines (a traceback) may follow
        in_record = False
        main_pid = self.state.main_pid
        pieces = block.split(b"\n")
        if pieces and not pieces[-1]:
            pieces.pop()  # the end of the last line
        for number, raw in enumerate(pieces, start=first_line):
            line = raw.decode("utf-8", "replace").rstrip("\r")
            header = (
                self._header.fullmatch(line) if line.startswith(self._lead) else None
            )
            if header is None:
                banner = _BANNER.match(line)
                if banner:  # a worker starting (again): no line of the record above
                    in_record, record = False, None
                    out.ignored += 1
                    yield _Note(number, 0, "", "ready", node=banner["node"])
                elif in_record and line.strip():  # a line of the record above
                    if record is None:
                        out.ignored += 1  # of a line that is no event
                    elif record.traceback is not None:
                        record.traceback.append(line)
                else:
                    in_record = False
                    out.ignored += bool(line.strip())
                continue
            in_record, record = True, None
            fields = header.groupdict()
            message, process = fields["message"], fields.get("process") or ""
            pid = fields.get("pid")
            if pid is not None and process == "MainProcess" and int(pid) != main_pid:
                main_pid = int(pid)  # a worker (started again) names its main process
                yield _Note(number, 0, process, "pid", pid=main_pid)
            taskish = _TASKISH.match(message) is not None
            try:
                ts = self._micros(header["ts"])
            except ValueError as exc:
                if taskish:
                    out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                else:
                    out.ignored += 1
                continue
            try:
                item = _classify(
                    number, raw.strip(), ts, fields.get("level") or "", process, message
                )
            except RecordError as exc:
                out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                continue
            if item is None:
                out.ignored += 1
                continue
            if isinstance(item, _Note):
                out.ignored += 1  # evidence for attribution, not a lifecycle step
            else:
                record = item
                if pid is not None:
                    item.attrs["celery.pid"] = int(pid)
                if item.kind in ("fail", "lost"):
                    item.traceback = []
            yield item

    def _micros(self, text: str) -> int:
        if not _CELERY_TIME.fullmatch(text):
            raise ValueError(f"time {text!r} is not Celery's YYYY-MM-DD HH:MM:SS,mmm")
        try:
            local = datetime.fromisoformat(text.replace(",", "."))
        except ValueError as exc:
            raise ValueError(f"time {text!r} is not a date: {exc}") from exc
        moment = local.replace(tzinfo=self.options.zone)
        micros = round(moment.timestamp() * 1_000_000)
        if not MICROS_RANGE[0] <= micros <= MICROS_RANGE[1]:
            raise ValueError(f"time {text!r} out of range")
        return micros

    # -- who ran what --------------------------------------------------------------------

    def _worker(self) -> str:
        node = self.options.hostname or self.state.host or self.fallback_host
        return f"{node}:{self.state.main_pid}" if self.state.main_pid else node

    def _open_run(self, worker: str, job_id: str, before: int) -> _Run | None:
        """The run of `job_id` on `worker` received last at or before `before` (else the
        oldest one open)."""
        runs = self.state.runs.get((worker, job_id))
        if not runs:
            return None
        earlier = [run for run in runs if run.ts <= before]
        return earlier[-1] if earlier else runs[0]

    def _close(self, run: _Run) -> None:
        runs = self.state.runs.get((run.worker, run.job_id), [])
        if run in runs:
            runs.remove(run)
        if not runs:
            self.state.runs.pop((run.worker, run.job_id), None)
        for index in (self.state.by_process, self.state.by_pid):
            for key in [key for key, value in index.items() if value is run]:
                del index[key]

    def _note(self, note: _Note) -> None:
        state = self.state
        if note.kind in ("pid", "ready"):
            old = self._worker()
            if note.kind == "pid":
                state.main_pid = note.pid
            elif not self.options.hostname:
                state.host = note.node
            # A worker starting again: what it had open died with it, unended.
            for worker in {old, self._worker()}:
                for key in [key for key in state.runs if key[0] == worker]:
                    for run in list(state.runs[key]):
                        self._close(run)
            return
        worker = self._worker()
        if note.kind == "exited":
            run = state.by_pid.get((worker, note.pid)) or state.by_process.get(
                (worker, note.process)
            )
            state.lost[worker] = _Lost(note.process, note.pid, note.how, run)
            return
        run = self._open_run(worker, note.job_id, note.ts)
        if run is None:
            return
        if note.kind == "accepted":
            state.by_pid[(worker, note.pid)] = run
        else:  # a task's own log line: its pool process runs it
            known = state.by_process.get((worker, note.process))
            if known is None or known.job_id != note.job_id:
                state.by_process[(worker, note.process)] = run
                run.process = note.process

    def _event(
        self,
        event: _Event,
        uid: str,
        source: str,
        out: Decoded,
        items: list[_Event | _Note],
        at: int,
    ) -> Row | None:
        """The row of an event; `items[at + 1:]` are the lines read after it."""
        worker = self._worker()
        attrs = {
            "message": event.message,
            "celery.level": event.level,
            "celery.process": event.process,
            **event.attrs,
        }
        if event.traceback:
            attrs["celery.traceback"] = "\n".join(event.traceback)[:MAX_TRACEBACK]
        execution: str | None = None
        if event.kind == "deliver":
            assert event.job_id is not None
            run = _Run(uid, event.ts, event.job_id, event.job_type, worker)
            self.state.runs.setdefault((worker, event.job_id), []).append(run)
            execution = uid
        elif event.kind == "lost":
            run = self._lost_run(worker, attrs, items, at)
            if attrs.get("celery.attribution") == "oldest_open_run" and self._ambiguous is None:
                self._ambiguous = (event.number, event.line)
            if run is None:
                out.ignored += 1  # a lost process with no task open: nothing to settle
                return None
            event.job_id, event.job_type, execution = run.job_id, run.job_type, run.uid
            attrs["settled_by"] = f"{worker} MainProcess"
            self._close(run)
            event.kind = "nack"
        else:
            assert event.job_id is not None
            run = self._ending(worker, event)
            if run is not None:
                execution = run.uid
                self._close(run)
        flat: dict[str, Any] = {
            "ts": event.ts,
            "event": event.kind,
            "job_id": event.job_id,
            "worker_id": worker,
            **attrs,
        }
        if event.job_type:
            flat["job_type"] = event.job_type
        try:
            row = self.normaliser.normalise(flat, uid=uid, source=source)
        except RecordError as exc:
            out.rejected.append(Rejected(f"{source}:{event.number}", str(exc)))
            return None
        row["execution_id"] = execution
        return row

    def _ending(self, worker: str, event: _Event) -> _Run | None:
        """The open run an end line ends."""
        assert event.job_id is not None
        runtime = event.attrs.get("celery.runtime_s")
        if isinstance(runtime, float):
            start = event.ts - round(runtime * 1_000_000) + START_SLACK_US
            return self._open_run(worker, event.job_id, start)
        known = self.state.by_process.get((worker, event.process))
        if known is not None and known.job_id == event.job_id:
            return known
        return self._open_run(worker, event.job_id, event.ts)

    def _lost_run(
        self, worker: str, attrs: dict[str, Any], items: list[_Event | _Note], at: int
    ) -> _Run | None:
        """The run a WorkerLostError settles (see the module's docstring). A run whose end
        a live process logs further on (before its task id is received again) was not it."""
        lost = self.state.lost.pop(worker, None)
        if lost is not None:
            attrs.update({"celery.lost_process": lost.process, "celery.lost_pid": lost.pid,
                          "celery.exit": lost.how})
            if lost.run is not None and lost.run in self.state.runs.get(
                (worker, lost.run.job_id), []
            ):
                attrs["celery.attribution"] = "process"
                return lost.run
        elsewhere = {
            id(run) for (w, process), run in self.state.by_process.items()
            if w == worker and (lost is None or process != lost.process)
        }
        dead = lost.process if lost is not None else None
        ended: set[str] = set()
        received: set[str] = set()
        for index in range(at + 1, len(items)):
            item = items[index]
            if not isinstance(item, _Event) or item.job_id is None:
                continue
            if item.kind == "deliver":
                received.add(item.job_id)
            elif item.kind != "lost" and item.process != dead and item.job_id not in received:
                ended.add(item.job_id)
        open_runs = sorted(
            (run for (w, job_id), runs in self.state.runs.items()
             if w == worker and job_id not in ended for run in runs
             if id(run) not in elsewhere),
            key=lambda run: run.ts,
        )
        if not open_runs:
            return None
        attrs["celery.attribution"] = "only_open_run" if len(open_runs) == 1 else (
            "oldest_open_run"
        )
        return open_runs[0]


def _classify(
    number: int, line: bytes, ts: int, level: str, process: str, message: str
) -> _Event | _Note | None:
    """A header line's message -> an event, a note, or None (not a task's). RecordError
    for a line that starts like a task line but cannot be read."""

    def event(kind: str, found: re.Match[str] | None, **attrs: Any) -> _Event:
        return _Event(
            number, line, ts, level, process, message, kind,
            job_id=found["id"] if found else None,
            job_type=found["name"] if found else None,
            attrs={k: v for k, v in attrs.items() if v is not None},
        )

    if message.startswith("Received task: "):
        old = _OLD_RECEIVED.fullmatch(message)
        if old is None:
            raise RecordError("a 'Received task:' line without a task name and [id]")
        return event("deliver", old)
    if message.startswith("Task handler raised error: "):
        found = _HANDLER_ERROR.fullmatch(message)
        assert found is not None
        return event("lost", None, reason=found["exc"], **{"celery.exception": found["exc"]})
    accepted = _ACCEPTED.match(message)
    if accepted:
        return _Note(number, ts, process, "accepted", accepted["id"], int(accepted["pid"]))
    exited = _EXITED.match(message)
    if exited:
        # The note's process is the one that died.
        return _Note(number, ts, exited["process"], "exited", pid=int(exited["pid"]),
                     how=exited["how"])
    ready = _READY.fullmatch(message)
    if ready:
        return _Note(number, ts, process, "ready", node=ready["node"])
    if _TASKISH.match(message):
        task = _TASK.fullmatch(message)
        if task is None:
            raise RecordError("a task line without a task name and [id]")
        rest = task["rest"] or ""
        if rest == "received" or rest.startswith("received "):
            return event("deliver", task)
        if rest.startswith("succeeded in "):
            done = _SUCCEEDED.fullmatch(rest)
            try:
                runtime = float(done["runtime"]) if done else None
            except ValueError:
                runtime = None
            if done is None or runtime is None or not runtime >= 0:
                raise RecordError("a success line without its runtime ('succeeded in Ns: ')")
            return event("ack", task, **{"celery.runtime_s": runtime,
                                         "celery.result": done["result"]})
        lost_after = _LOST_AFTER_SUCCESS.fullmatch(rest)
        if lost_after:
            return event("ack", task, **{"celery.exception": lost_after["exc"]})
        retry = _RETRY.fullmatch(rest)
        if retry:
            return event("nack", task, reason=retry["reason"])
        failed = _FAILED.fullmatch(rest)
        if failed:
            return event("fail", task, reason=failed["exc"],
                         **{"celery.exception": failed["exc"]})
        if rest == "ignored":
            return event("ack", task)
        return None  # a task's line that is no lifecycle step (a handler's error, say)
    own = _TASK_LOGGER.match(message)
    if own:
        return _Note(number, ts, process, "task_log", own["id"])
    return None

