"""Dramatiq's own worker logs -> contract events, with no change to the workers.

The `dramatiq` command writes every process's records in one format,
`[%(asctime)s] [PID %(process)d] [%(threadName)s] [%(name)s] [%(levelname)s] %(message)s`
(dramatiq/cli.py, LOGFORMAT). What its worker processes say about a message, in Dramatiq
2.x (dramatiq/worker.py, dramatiq/middleware/retries.py):

    at -v (DEBUG), from the worker thread that runs the message:
    [...] [PID 3338] [Thread-4] [dramatiq.worker.WorkerThread] [DEBUG] Received message
        charge('k1', fault=None) with id 'd444d513-...'.
    [...] [PID 3338] [Thread-4] [dramatiq.worker.ConsumerThread(q)] [DEBUG] Acknowledging
        message 'd444d513-...'.                      (or `Rejecting message '...'.`)
    at INFO and above, from the same thread:
    [...] [Thread-5] [dramatiq.worker.WorkerThread] [ERROR] Failed to process message
        charge('k2') with unhandled exception.       (its traceback follows)
    [...] [Thread-5] [dramatiq.middleware.retries.Retries] [INFO] Retrying message
        '571a...' in 181 milliseconds.
    [...] [Thread-4] [dramatiq.middleware.retries.Retries] [WARNING] Retries exceeded
        for message 'c61a...'.
    [...] [dramatiq.middleware.retries.Retries] [INFO] Aborting message '...'.

`Received` is a `deliver`, `Acknowledging` an `ack`, `Retrying` a `nack` (reason `retry`:
Dramatiq enqueues a copy with the same message id, and then acknowledges the one that
failed), `Retries exceeded`, `Aborting` and `Rejecting` a `fail`. The message id is the
job_id (the same across retries), the actor the job_type. An ack or reject that follows
the retry or failure line of its run repeats what that line said and is counted as
ignored. The delay queue's own lines (`ConsumerThread(q.DQ)`) are no execution's.

A run is one `Received`, named by the process, the thread and the message id, and every
later line of that process and thread about that id ends it (`execution_id` says which).
No `delivery_attempt` is given: a `Received` line does not say the message's retry count
(`options.retries`), and one log sees only its own workers' retry lines, so a count made
from them could skip numbers where another worker's log holds the runs between, which the
queries would read as attempts that left no events (a crash). The retry lines this log saw
before a run are kept as `dramatiq.retries_seen`; every `Received` starts an execution.

The worker (`worker_id`) is `HOST:PID` of the worker process: HOST from the options, else
the log file's name (the log names no host). A process killed mid-run leaves its run
without an end; the next `Received` of that message id elsewhere then reads as a crash.

The actor's arguments are on the `Received` line (as `repr`s); those that read as Python
literals are kept as `dramatiq.args.N` and `dramatiq.kwargs.NAME` (text), so a mapping
file can name the idempotency key: `idempotency_key = "dramatiq.kwargs.order_id"`.

At INFO (no `-v`) no `Received` line is written: a retry, retries-exceeded or abort line
is then an execution of its own (it ran, and failed), so a message that failed twice or
more shows as a duplicate; its last, successful run writes nothing, so a message retried
once and then run to success shows no duplicate at INFO.

A line in the format that says a lifecycle step but cannot be read (no quoted id, a time
that is no date) is rejected with file:line and why; other lines (the boot lines, other
loggers) are counted as ignored. An event's uid is the XXH3 hash of its line, so a file
read again stores nothing twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from collectors.call_args import call_attrs
from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser, RecordError, Row
from collectors.timestamps import MICROS_RANGE
from collectors.worker_log_reader import WorkerLogReader

DRAMATIQ_LOG = "dramatiq-log"  # the name of the format in `--format`
#: The most of a traceback kept in a failure's attrs.
MAX_TRACEBACK = 8_192
#: The longest argument text kept per argument.
MAX_ARGUMENT = 1_024

_HEADER = re.compile(
    r"\[(?P<ts>[^\]]*)\] \[PID (?P<pid>\d+)\] \[(?P<thread>[^\]]*)\] "
    r"\[(?P<logger>[^\]\s]+)\] \[(?P<level>[A-Z]+)\] (?P<message>.*)"
)
_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}")
_ID = r"'(?P<id>[^'\s]+)'"
_RECEIVED = re.compile(rf"Received message (?P<call>.*) with id {_ID}\.")
_ACK = re.compile(rf"Acknowledging message {_ID}\.")
_REJECT = re.compile(rf"Rejecting message {_ID}\.")
_RETRY = re.compile(rf"Retrying message {_ID} in (?P<delay>\d+) milliseconds\.")
_EXCEEDED = re.compile(rf"Retries exceeded for message {_ID}\.")
_ABORT = re.compile(rf"Aborting message {_ID}\.")
_FAILED = re.compile(r"Failed to process message (?P<call>.*) with (?:unhandled|expected) "
                     r"exception(?: (?P<exc>\w+))?\.")
#: Messages that name a lifecycle step: a line starting so that cannot be read is rejected.
_STEPS = ("Received message ", "Acknowledging message ", "Rejecting message ",
          "Retrying message ", "Retries exceeded for message ", "Aborting message ")
_CONSUMER = re.compile(r"dramatiq\.worker\.ConsumerThread\((?P<queue>.*)\)")
_CALL = re.compile(r"(?P<actor>[A-Za-z_][\w.]*)\((?P<params>.*)\)", re.DOTALL)


@dataclass(frozen=True)
class DramatiqLogOptions:
    """What the logs do not say: the host the workers ran on, the zone of their clock."""

    hostname: str | None = None
    zone: tzinfo = UTC


def sniff_dramatiq(head: bytes) -> bool:
    """Whether the first lines of a file are a Dramatiq worker's (before any JSON line)."""
    for raw in head.splitlines()[:200]:
        line = raw.decode("utf-8", "replace").rstrip()
        if line.lstrip().startswith("{"):
            return False
        found = _HEADER.fullmatch(line)
        if found and _TIME.fullmatch(found["ts"]):
            return True
    return False


def parse_call(call: str) -> tuple[str, dict[str, str]] | None:
    """`charge('k1', fault=None)` -> ("charge", {"dramatiq.args.0": "k1",
    "dramatiq.kwargs.fault": "None"}); arguments whose repr is no Python literal are left
    out. None where the text is no call at all."""
    found = _CALL.fullmatch(call.strip())
    if found is None:
        return None
    attrs = call_attrs(found["params"], "dramatiq")
    return found["actor"], {name: argument_text(value) for name, value in attrs.items()}


def argument_text(value: Any) -> str:
    """An argument as the text a key is compared by: a string as it is, else its repr."""
    return (value if isinstance(value, str) else repr(value))[:MAX_ARGUMENT]


@dataclass
class _Run:
    uid: str
    job_id: str
    job_type: str | None
    worker: str
    ended: str | None = None  # the event that ended it (nack, fail, ack)


@dataclass
class _State:
    """What one log has said so far that later lines need; small, copied per chunk."""

    runs: dict[tuple[str, str, str], _Run] = field(default_factory=dict)  # worker, thread, id
    retries: dict[str, int] = field(default_factory=dict)  # message id -> retry lines seen
    failures: dict[tuple[str, str], str] = field(default_factory=dict)  # worker, thread
    debug: bool = False  # a `Received` line was seen: the log is written at -v


@dataclass
class _Line:
    number: int
    line: bytes
    ts: int
    pid: int
    thread: str
    logger: str
    level: str
    kind: str  # deliver, ack, reject, retry, exceeded, abort, failed
    message: str = ""
    job_id: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    traceback: list[str] | None = None


class DramatiqLogReader(WorkerLogReader[_State]):
    """Reads one Dramatiq log in order, chunk after chunk, keeping what later lines need.

    The same surface as the Celery log's reader, so `ingest` and the tail read both alike:
    `decode` a chunk (complete lines), `checkpoint`/`restore` to read a chunk again after
    its rows could not be stored, `prime` to learn what earlier lines said.
    """

    def __init__(
        self,
        normaliser: Normaliser | None = None,
        options: DramatiqLogOptions | None = None,
        *,
        name: str = "",
    ) -> None:
        self.normaliser = normaliser or Normaliser()
        self.options = options or DramatiqLogOptions()
        self.host = self.options.hostname or Path(name.removeprefix("tail:")).name or "dramatiq"
        self.state = _State()

    def decode(self, block: bytes, first_line: int, source: str) -> Decoded:
        """Rows of the lines in `block` (numbered from `first_line`), in line order."""
        from collectors.uids import line_uids  # here: it brings polars

        out = Decoded()
        lines = list(self._parse(block, first_line, source, out))
        uids = iter(line_uids([line.line for line in lines]))
        for line in lines:
            row = self._event(line, next(uids), source, out)
            if row is not None:
                out.rows.append(row)
        return out

    # -- reading lines -------------------------------------------------------------------

    def _parse(
        self, block: bytes, first_line: int, source: str, out: Decoded
    ) -> Iterator[_Line]:
        record: _Line | None = None  # a failure whose traceback may follow
        pieces = block.split(b"\n")
        if pieces and not pieces[-1]:
            pieces.pop()
        for number, raw in enumerate(pieces, start=first_line):
            text = raw.decode("utf-8", "replace").rstrip("\r")
            header = _HEADER.fullmatch(text) if text.startswith("[") else None
            if header is None:
                if record is not None and record.traceback is not None and text.strip():
                    record.traceback.append(text)
                else:
                    out.ignored += bool(text.strip())
                continue
            record = None
            message = header["message"]
            stepish = message.startswith(_STEPS) or message.startswith("Failed to process ")
            if not stepish:
                out.ignored += 1
                continue
            try:
                ts = self._micros(header["ts"])
                line = _classify(number, raw.strip(), ts, header, message)
            except (ValueError, RecordError) as exc:
                out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                continue
            if line is None:
                out.ignored += 1
                continue
            if line.kind == "failed":
                line.traceback = []
                record = line
            yield line

    def _micros(self, text: str) -> int:
        if not _TIME.fullmatch(text):
            raise ValueError(f"time {text!r} is not Dramatiq's YYYY-MM-DD HH:MM:SS,mmm")
        try:
            local = datetime.fromisoformat(text.replace(",", "."))
        except ValueError as exc:
            raise ValueError(f"time {text!r} is not a date: {exc}") from exc
        micros = round(local.replace(tzinfo=self.options.zone).timestamp() * 1_000_000)
        if not MICROS_RANGE[0] <= micros <= MICROS_RANGE[1]:
            raise ValueError(f"time {text!r} out of range")
        return micros

    # -- who ran what --------------------------------------------------------------------

    def _event(self, line: _Line, uid: str, source: str, out: Decoded) -> Row | None:
        state = self.state
        worker = f"{self.host}:{line.pid}"
        where = (worker, line.thread)
        if line.kind == "failed":  # no id: what the next end line of this thread says
            tail = [t for t in line.traceback or [] if t and not t.startswith(" ")]
            state.failures[where] = (tail[-1] if tail else line.attrs.get("exception", ""))
            out.ignored += 1
            return None
        run = state.runs.get((*where, line.job_id))
        attrs: dict[str, Any] = {
            "message": line.message[:MAX_TRACEBACK],
            "dramatiq.level": line.level,
            "dramatiq.thread": line.thread,
            "dramatiq.pid": line.pid,
            "dramatiq.logger": line.logger,
            **line.attrs,
        }
        kind = line.kind
        if kind == "deliver":
            attrs["dramatiq.retries_seen"] = state.retries.get(line.job_id, 0)
            run = _Run(uid, line.job_id, attrs.get("dramatiq.actor"), worker)
            state.runs[(*where, line.job_id)] = run
            state.failures.pop(where, None)
            state.debug = True
            event = "deliver"
        elif kind in ("ack", "reject"):
            if run is not None and run.ended is not None:
                out.ignored += 1  # the retry or failure line of this run said it first
                del state.runs[(*where, line.job_id)]
                return None
            event = "ack" if kind == "ack" else "fail"
            if kind == "reject":
                attrs["reason"] = "rejected"
            if run is not None:
                del state.runs[(*where, line.job_id)]
        else:  # retry, exceeded, abort: the run's own verdict
            if kind == "retry":
                state.retries[line.job_id] = state.retries.get(line.job_id, 0) + 1
            event = "nack" if kind == "retry" else "fail"
            exception = state.failures.pop(where, None)
            if exception:
                attrs["dramatiq.exception"] = exception
            attrs["reason"] = {"retry": "retry", "exceeded": "retries exceeded",
                               "abort": "aborted"}[kind] + (f": {exception}" if exception else "")
            if run is not None:
                run.ended = event
        flat: dict[str, Any] = {
            "ts": line.ts, "event": event, "job_id": line.job_id, "worker_id": worker, **attrs,
        }
        job_type = run.job_type if run is not None else None
        if job_type:
            flat["job_type"] = job_type
        try:
            row = self.normaliser.normalise(flat, uid=uid, source=source)
        except RecordError as exc:
            out.rejected.append(Rejected(f"{source}:{line.number}", str(exc)))
            return None
        if run is not None:
            row["execution_id"] = run.uid
        elif event in ("nack", "fail") and kind != "reject" and not state.debug:
            row["execution_id"] = uid  # a log at INFO: the retry line is all a run says
        else:
            row["execution_id"] = None
        return row


def _classify(
    number: int, raw: bytes, ts: int, header: re.Match[str], message: str
) -> _Line | None:
    """A header line's message -> a line that says a step, or None (not one). RecordError
    for a line that starts like a step but cannot be read."""

    def line(kind: str, job_id: str = "", **attrs: Any) -> _Line:
        return _Line(number, raw, ts, int(header["pid"]), header["thread"], header["logger"],
                     header["level"], kind, message, job_id,
                     {k: v for k, v in attrs.items() if v is not None})

    consumer = _CONSUMER.fullmatch(header["logger"])
    if message.startswith("Received message "):
        found = _RECEIVED.fullmatch(message)
        if found is None:
            raise RecordError("a 'Received message' line without its quoted id")
        call = parse_call(found["call"])
        actor, arguments = call if call is not None else (None, {})
        return line("deliver", found["id"], **{"dramatiq.actor": actor}, **arguments)
    for kind, pattern in (("ack", _ACK), ("reject", _REJECT), ("retry", _RETRY),
                          ("exceeded", _EXCEEDED), ("abort", _ABORT)):
        if message.startswith(pattern.pattern.split(" ", 1)[0] + " "):
            found = pattern.fullmatch(message)
            if found is None:
                raise RecordError(f"a '{message.split(' ', 2)[0]}' line without its quoted id")
            if kind in ("ack", "reject") and consumer and consumer["queue"].endswith(".DQ"):
                return None  # the delay queue's consumer moving a message: no run's end
            extra = {"dramatiq.retry_delay_ms": int(found["delay"])} if kind == "retry" else {}
            queue = consumer["queue"] if consumer else None
            return line(kind, found["id"], queue=queue, **extra)
    failed = _FAILED.fullmatch(message)
    if failed:
        return line("failed", exception=failed["exc"])
    return None
