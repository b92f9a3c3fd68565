"""What the readers of RQ's and arq's worker logs share: lines read in order, chunk after
chunk, each a time of day and a message, with the runs still open carried from one chunk
to the next.

A reader sees one worker's log (a file, or a followed path across its rotations). It
turns the lines that are lifecycle steps into rows, ties each end line to the run it ends
(`execution_id`, the uid of that run's `deliver`), and keeps the rest of a record (a
traceback) with the line above it. Each line is placed within its second
(collectors/time_of_day.py). The uid of a row is the XXH3 hash of its line, its second
and how many lines of that second came before it in the file: two identical lines within
one second (a job that failed and started again at once) stay two events, and reading a
file again, cut into other blocks, gives the same uids.

`checkpoint`/`restore` let a caller take a chunk back when its rows could not be stored;
`prime` reads lines before a resumed tail's offset again, storing nothing, to learn which
runs are open and which worker writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser, RecordError, Row
from collectors.time_of_day import (
    END_SLOT,
    SHORT_FAILED_SLOT,
    SHORT_SLOT,
    START_SLOT,
    TIME_PATTERN,
    DayBasis,
    LineClock,
)
from collectors.worker_log_reader import WorkerLogReader

#: The most of a traceback kept in a failure's attrs.
MAX_TRACEBACK = 8_192


@dataclass
class Event:
    """A line that is a lifecycle step, before its uid is known."""

    number: int
    line: bytes
    ts: int  # the second's µs (placed within it by `decode`), or the line's own
    kind: str  # deliver, ack, nack, fail
    job_id: str
    attrs: dict[str, Any] = field(default_factory=dict)
    job_type: str | None = None
    queue: str | None = None
    worker: str | None = None  # where the line names it
    attempt: int | None = None
    traceback: list[str] | None = None
    exact: bool = False  # the time had a fraction: no placing
    if_open: bool = False  # an end that counts only where its run is still open


@dataclass
class Run:
    """A run that has started and not yet ended."""

    uid: str
    job_id: str
    job_type: str | None
    queue: str | None
    attempt: int | None


@dataclass
class ReaderState:
    """What one log has said that later lines need; copied for a checkpoint."""

    clock: LineClock
    worker: str | None = None  # the worker writing now, where the log names it
    starts: int = 0  # how many times a worker started in this log
    second: int = -1  # the second of the last event, and how many events it has had
    ordinal: int = 0
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)


class QueueLogReader(WorkerLogReader[ReaderState]):
    """Reads one worker's log in order; subclasses say what each message is (`classify`)."""

    #: The log's name for `worker_id` where the lines do not name the worker.
    fallback_prefix = "worker"
    #: What separates the time from the message (`HH:MM:SS message`, `HH:MM:SS: message`).
    separator = " "

    def __init__(
        self, normaliser: Normaliser | None = None, basis: DayBasis | None = None, *,
        name: str = "",
    ) -> None:
        self.normaliser = normaliser or Normaliser()
        self.basis = basis or DayBasis()
        self.fallback = Path(name.removeprefix("tail:")).name or self.fallback_prefix
        self.state = ReaderState(LineClock(self.basis))
        self._header = re.compile(
            rf"(?P<ts>{TIME_PATTERN}){re.escape(self.separator)}(?P<message>.*)"
        )

    # -- the interface the ingest and the tail use --------------------------------------

    def decode(self, block: bytes, first_line: int, source: str) -> Decoded:
        """Rows of the lines in `block` (numbered from `first_line`), in line order."""
        from collectors.uids import line_uids  # here: it brings polars

        out = Decoded()
        events = list(self._parse(block, first_line, source, out))
        # The uid: the line, its second, and how many lines of that second came before
        # it: the same wherever the file is cut into blocks.
        keyed = [event.line + b"\x00" + str(event.ts).encode() + b"\x00"
                 + str(ordinal).encode() for event, ordinal in self._ordinals(events)]
        self._place(events)
        for event, uid in zip(events, line_uids(keyed), strict=True):
            row = self._row(event, uid, source, out)
            if row is not None:
                out.rows.append(row)
        return out

    def _ordinals(self, events: list[Event]) -> list[tuple[Event, int]]:
        state = self.state
        numbered = []
        for event in events:
            if event.ts != state.second:
                state.second, state.ordinal = event.ts, 0
            numbered.append((event, state.ordinal))
            state.ordinal += 1
        return numbered

    def _place(self, events: list[Event]) -> None:
        """Each event's microsecond within its second (collectors/time_of_day.py): a run
        that starts and ends within one second in this block is short."""
        short: dict[int, int] = {}  # index -> slot
        open_at: dict[tuple[str | None, str], int] = {}
        for index, event in enumerate(events):
            run = (event.worker, event.job_id)
            if event.kind == "deliver":
                open_at[run] = index
                continue
            if not event.job_id:  # a line naming no job ends the worker's one open run
                mine = [key for key in open_at if key[0] == event.worker]
                run = mine[0] if len(mine) == 1 else run
            if run in open_at:
                start = open_at.pop(run)
                if events[start].ts == event.ts:
                    slot = SHORT_SLOT if event.kind == "ack" else SHORT_FAILED_SLOT
                    short.update({start: slot, index: slot})
        for index, event in enumerate(events):
            if event.exact:
                continue
            slot = short.get(index, START_SLOT if event.kind == "deliver" else END_SLOT)
            event.ts = self.state.clock.place(event.ts, slot)

    # -- what subclasses say -------------------------------------------------------------

    def classify(self, message: str) -> tuple[str, dict[str, Any]] | None:
        """A message -> (kind, fields) or None when it is no step; RecordError for a line
        that starts like a step but cannot be read. Kinds: deliver, ack, nack, fail,
        started (a worker starting: fields may name it), note (read, no row)."""
        raise NotImplementedError

    def worker_id(self) -> str:
        state = self.state
        if state.worker:
            return state.worker
        return self.fallback if state.starts <= 1 else f"{self.fallback}#{state.starts}"

    # -- reading -------------------------------------------------------------------------

    def _parse(self, block: bytes, first_line: int, source: str, out: Decoded) -> list[Event]:
        events: list[Event] = []
        record: Event | None = None  # the event whose traceback may follow
        pieces = block.split(b"\n")
        if pieces and not pieces[-1]:
            pieces.pop()
        for number, raw in enumerate(pieces, start=first_line):
            line = raw.decode("utf-8", "replace").rstrip("\r")
            header = self._header.fullmatch(line)
            if header is None:
                if record is not None and record.traceback is not None:
                    if line.strip():  # a traceback's blank lines (a chained one) go on
                        record.traceback.append(line)
                else:
                    out.ignored += bool(line.strip())
                continue
            record = None
            message = header["message"]
            try:
                found = self.classify(message)
            except RecordError as exc:
                out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                continue
            if found is None:
                out.ignored += 1
                continue
            kind, fields = found
            if kind in ("started", "note"):
                out.ignored += 1
                if kind == "started":
                    self._started(fields)
                continue
            try:
                ts, exact = self.state.clock.second(header["ts"])
            except ValueError as exc:
                out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
                continue
            event = Event(number, raw.strip(), ts, kind, **fields, exact=exact)
            event.worker = event.worker or self.worker_id()
            if kind == "fail":
                event.traceback = []
                record = event
            events.append(event)
        return events

    def _started(self, fields: dict[str, Any]) -> None:
        """A worker (re)starting in this log: what it had open died with it, unended."""
        state = self.state
        old = self.worker_id()
        state.starts += 1
        state.worker = fields.get("worker")
        state.runs = {k: v for k, v in state.runs.items() if k[0] != old}

    def open_run(self, worker: str, job_id: str) -> Run | None:
        runs = self.state.runs.get((worker, job_id))
        return runs[-1] if runs else None

    def _row(self, event: Event, uid: str, source: str, out: Decoded) -> Row | None:
        worker = event.worker or self.worker_id()
        attrs = dict(event.attrs)
        if event.traceback:
            attrs["traceback"] = "\n".join(event.traceback)[:MAX_TRACEBACK]
            if "reason" not in attrs:
                attrs["reason"] = event.traceback[-1].strip()
        execution: str | None
        run: Run | None
        if event.kind == "deliver":
            run = Run(uid, event.job_id, event.job_type, event.queue, event.attempt)
            self.state.runs.setdefault((worker, event.job_id), []).append(run)
            execution = uid
        else:
            if not event.job_id:  # a line naming no job: the worker's one open run
                running = [r for (w, _), runs in self.state.runs.items() if w == worker
                           for r in runs]
                if len(running) != 1:
                    out.ignored += 1
                    return None
                event.job_id = running[0].job_id
            run = self.open_run(worker, event.job_id)
            if run is None and event.if_open:
                out.ignored += 1  # its run was ended by a line before it
                return None
            execution = run.uid if run is not None else None
            if run is not None:
                runs = self.state.runs[(worker, event.job_id)]
                runs.remove(run)
                if not runs:
                    del self.state.runs[(worker, event.job_id)]
        flat: dict[str, Any] = {
            "ts": event.ts, "event": event.kind, "job_id": event.job_id, "worker_id": worker,
            **attrs,
        }
        job_type = event.job_type or (run.job_type if run else None)
        queue = event.queue or (run.queue if run else None)
        attempt = event.attempt or (run.attempt if run else None)
        if job_type:
            flat["job_type"] = job_type
        if queue:
            flat["queue"] = queue
        if attempt:
            flat["delivery_attempt"] = attempt
        try:
            row = self.normaliser.normalise(flat, uid=uid, source=source)
        except RecordError as exc:
            out.rejected.append(Rejected(f"{source}:{event.number}", str(exc)))
            return None
        row["execution_id"] = execution
        return row
