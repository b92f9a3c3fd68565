"""RQ's worker logs -> contract events, with no change to the workers.

What `rq worker` writes at INFO in its default format (`%(asctime)s %(message)s`, datefmt
`%H:%M:%S`; RQ 2.x and 3.x alike, where 2.x's oldest releases leave out `Worker NAME: `):

    07:57:14 Worker 694f...: started with PID 14941, version 3.0.0
    07:57:16 Worker 694f...: q1: billing.charge('o-1') (1444b288-...)      <- a job starts
    07:57:16 Worker 694f...: q1: Job OK (1444b288-...)                     <- it succeeded
    07:57:16 Worker 694f...: job 5217...: exception raised while executing (billing.charge)
    Traceback (most recent call last): ...                                 <- its failure
    07:57:22 Worker 694f...: job b058... failed (Work-horse terminated unexpectedly;
        waitpid returned 9 (signal 9); )                                    (one line)
    07:57:22 Work horse killed for job b058...: retpid=15024, ret_val=9

A start line is a `deliver` (`queue`, `job_type` the function, the description and its
arguments in attrs: `rq.description`, `rq.args.N`, `rq.kwargs.NAME`, which a mapping file
can name as the idempotency key), `Job OK` an `ack`, an exception a `fail` (`reason` the
exception's last line, the traceback in attrs), and a killed work-horse a `nack` settled
by the worker's main process on the horse's behalf (`settled_by`), which the queries read
as a lost worker. A job that exceeded its retries or was stopped is a `fail`;
`StartedJobRegistry cleanup: ID Moved to FailedJobRegistry, due to AbandonedJobError`
(logged by RQ's `rq.registry` logger, which `rq worker` does not show by default) a
`fail` settled by the cleanup.

The worker is the name RQ gives it (`Worker NAME:`), else the last `started with PID`
line's, else the file's name. RQ counts no deliveries in its logs, so each start line is
a new execution; the lines after it on the same worker end it. What the logs cannot say:
a job that returned `Retry(...)` writes no line at INFO (its run reads as never ended), a
retry writes no line either (the next start line is the retry), and a whole worker killed
leaves only its start line (the job runs again once RQ finds it abandoned, 60 s or more
later, on a worker that pulls jobs).
"""

from __future__ import annotations

import re
from typing import Any

from collectors.call_args import call_attrs, split_call
from collectors.normalise import RecordError
from collectors.queue_log import QueueLogReader
from collectors.time_of_day import TIME_PATTERN

RQ_LOG = "rq-log"  # the name of the format in `--format`

_ID = r"[^\s()]+"
_WORKER = r"(?:Worker (?P<worker>[^\s:]+)(?: \[PID \d+\])?: )?"
_JOB_OK = re.compile(_WORKER + rf"(?P<queue>\S+): Job OK \((?P<id>{_ID})\)")
_EXCEPTION = re.compile(
    _WORKER + rf"(?:job (?P<id>{_ID})|\[Job (?P<old_id>{_ID})\]): exception raised while "
    r"executing \((?P<func>[^()]*)\)"
)
# RQ 2.0-2.1 name no job here: the worker's one run in progress is it.
_HORSE_OLD = re.compile(r"Moving job to FailedJobRegistry \((?P<why>Work-horse .*)\)")
_HORSE = re.compile(_WORKER + rf"job (?P<id>{_ID}) failed \((?P<why>Work-horse .*)\)")
_HORSE_KILLED = re.compile(
    rf"Work horse killed for job (?P<id>{_ID}): retpid=(?P<pid>\d+), ret_val=(?P<ret>-?\d+)"
)
_EXCEEDED = re.compile(
    _WORKER + rf"job (?P<id>{_ID}) has exceeded maximum retry attempts \((?P<max>\d+)\)"
)
_STOPPED = re.compile(_WORKER + rf"job (?P<id>{_ID}) stopped by user.*")
_ABANDONED = re.compile(
    rf"StartedJobRegistry cleanup: (?P<id>{_ID}) (?P<why>Moved to FailedJobRegistry, "
    r"due to AbandonedJobError.*)"
)
_STARTED = re.compile(r"Worker (?:rq:worker:)?(?P<worker>[^\s:]+)(?: \[PID \d+\])?:? started "
                      r"with PID (?P<pid>\d+)(?:, version (?P<version>\S+))?")
# A job's start: `QUEUE: DESCRIPTION (ID)`, or `QUEUE: ID` where descriptions are off.
_START = re.compile(_WORKER + r"(?P<queue>[^\s:]+): (?P<rest>.*)")
_DESCRIBED = re.compile(rf"(?P<description>.+) \((?P<id>{_ID})\)")
_BARE_ID = re.compile(r"[0-9A-Za-z][\w-]{7,}")


class RqLogReader(QueueLogReader):
    """One RQ worker's log, read in order (see the module's docstring)."""

    fallback_prefix = "rq"
    separator = " "

    def classify(self, message: str) -> tuple[str, dict[str, Any]] | None:
        message = message.rstrip()
        if (found := _JOB_OK.fullmatch(message)) is not None:
            return "ack", _fields(found)
        if (found := _EXCEPTION.fullmatch(message)) is not None:
            return "fail", _fields(found, job_id=found["id"] or found["old_id"],
                                   **{"rq.function": found["func"]})
        if (found := _HORSE_OLD.fullmatch(message)) is not None:
            return self._horse_lost(found["why"])
        if (found := _HORSE.fullmatch(message)) is not None:
            worker = found["worker"] or self.worker_id()
            return "nack", _fields(found, reason=found["why"],
                                   settled_by=f"{worker} main process")
        if (found := _HORSE_KILLED.fullmatch(message)) is not None:
            return self._horse_killed(found)
        if (found := _EXCEEDED.fullmatch(message)) is not None:
            return "fail", _fields(found, reason=f"exceeded maximum retry attempts "
                                   f"({found['max']})")
        if (found := _STOPPED.fullmatch(message)) is not None:
            return "fail", _fields(found, reason="stopped by user")
        if (found := _ABANDONED.fullmatch(message)) is not None:
            return "fail", _fields(found, reason=f"AbandonedJobError: {found['why']}",
                                   settled_by="StartedJobRegistry cleanup")
        if (found := _STARTED.fullmatch(message)) is not None:
            return "started", {"worker": found["worker"], "pid": int(found["pid"])}
        if "Job OK" in message or "exception raised while executing" in message \
                or "Work-horse terminated" in message:
            raise RecordError("an RQ job line without its job id in parentheses")
        return self._start(message)

    def _start(self, message: str) -> tuple[str, dict[str, Any]] | None:
        found = _START.fullmatch(message)
        if found is None or (found["worker"] is None and not _plausible_queue(found["queue"])):
            return None
        rest = found["rest"]
        described = _DESCRIBED.fullmatch(rest)
        if described is None:
            if _BARE_ID.fullmatch(rest) and found["worker"] is not None:
                return "deliver", _fields(found, job_id=rest)
            if found["worker"] is not None and found["queue"] not in _NOT_QUEUES and (
                rest.count("(") > rest.count(")") or rest.endswith("(")
            ):
                raise RecordError("an RQ start line cut short (no job id in parentheses)")
            return None
        description = described["description"]
        fields = _fields(found, job_id=described["id"],
                         **{"rq.description": description})
        call = split_call(description)
        if call is not None:
            fields["job_type"] = call[0]
            fields["attrs"].update(call_attrs(call[1], "rq"))
        return "deliver", fields

    def _horse_lost(self, why: str) -> tuple[str, dict[str, Any]] | None:
        """A killed work-horse's line that names no job: a worker runs one job at a time,
        so it is the one run open on this worker (`job_id` left empty: the reader finds
        it; none open, nothing to settle)."""
        worker = self.worker_id()
        return "nack", {"job_id": "", "if_open": True,
                        "attrs": {"reason": why, "settled_by": f"{worker} main process"}}

    def _horse_killed(self, found: re.Match[str]) -> tuple[str, dict[str, Any]] | None:
        """RQ 3 logs `job ID failed (Work-horse ...)` first, which ends the run; older
        releases only this."""
        worker = self.worker_id()
        return "nack", {
            "job_id": found["id"], "if_open": True,
            "attrs": {"reason": f"Work horse killed (ret_val={found['ret']})",
                      "settled_by": f"{worker} main process",
                      "rq.horse_pid": int(found["pid"])},
        }


#: `NAME: ...` lines of RQ's that are no job's start.
_NOT_QUEUES = frozenset({"Traceback", "ValueError", "Error"})


def _plausible_queue(name: str) -> bool:
    """Without `Worker NAME: ` before it (RQ's oldest 2.x), a start line is told from
    other loggers' lines only by its shape: the caller has checked `(ID)` at its end."""
    return bool(re.fullmatch(r"[\w.\-]+", name))


def _fields(found: re.Match[str], **attrs: Any) -> dict[str, Any]:
    groups = found.groupdict()
    fields: dict[str, Any] = {"job_id": attrs.pop("job_id", None) or groups["id"],
                              "attrs": attrs}
    if groups.get("worker"):
        fields["worker"] = groups["worker"]
    if groups.get("queue"):
        fields["queue"] = groups["queue"]
    return fields


def sniff(head: bytes) -> bool:
    """Whether the first lines of a file are an RQ worker's: its `started with PID` line,
    or a job line in RQ's shape (`HH:MM:SS [Worker NAME: ]QUEUE: ... (ID)`)."""
    for raw in head.splitlines()[:200]:
        line = raw.decode("utf-8", "replace").rstrip()
        if line.lstrip().startswith("{"):
            return False
        header = re.fullmatch(rf"({TIME_PATTERN}) (?P<message>.*)", line)
        if header is None:
            continue
        message = header["message"]
        if _STARTED.fullmatch(message) or _JOB_OK.fullmatch(message):
            return True
        start = _START.fullmatch(message)
        if start is not None and start["worker"] and _DESCRIBED.fullmatch(start["rest"]):
            return True
    return False
