"""arq's worker logs -> contract events, with no change to the workers.

What an `arq` worker writes at INFO in its default format (`%(asctime)s: %(message)s`,
datefmt `%H:%M:%S`); the seconds before the arrow are since the job was enqueued on a
start line, the run's duration on the others:

    08:01:42: Starting worker for 5 functions: ok, boom, retry_once, hog, slow
    08:01:43:   0.12s → d6da...:ok('k1')                       <- try 1 starts
    08:01:43:   0.00s ← d6da...:ok ● 'k1'                      <- it returned 'k1'
    08:01:43:   0.30s → f0bf...:retry_once('k3') try=2         <- try 2
    08:01:43:   0.00s ↻ f0bf...:retry_once retrying job in 0.10s
    08:01:43:   0.00s ↻ f0bf...:slow cancelled, will be run again
    08:01:44:   1.01s ! 2b04...:slow failed, TimeoutError:     (a traceback follows)
    08:01:54:  11.12s → b179...:hog('k4', 13) try=2 delayed=11.12s

A start line is a `deliver` with `delivery_attempt` = `try=N` (1 where absent), `job_type`
the function and the arguments in attrs (`arq.args.N`, `arq.kwargs.NAME`; arq cuts them
at 80 characters, so an argument past the cut is missing); `←` an `ack` with the result's
text (`arq.result`, cut alike); `↻ ... retrying` and `↻ ... cancelled, will be run again`
a `nack` (the job runs again); `! ... failed` and `⊘ ... aborted` a `fail`. `! ... max
retries N exceeded` and `job ID expired` are tries that never ran a body: counted as
ignored, no execution.

arq logs no worker name nor PID: the worker is the file's name, with `#N` for its N-th
start in that file (`Starting worker for ...`). A worker killed leaves its runs' start
lines only; arq runs each such job again, with the next `try`, once its in-progress key
expires (the job timeout + 10 s), and logs nothing about why.
"""

from __future__ import annotations

import re
from typing import Any

from collectors.call_args import call_attrs
from collectors.normalise import RecordError
from collectors.queue_log import QueueLogReader
from collectors.time_of_day import TIME_PATTERN

ARQ_LOG = "arq-log"  # the name of the format in `--format`

_T = r"\s*(?P<t>\d+\.\d{2})s "
_REF = r"(?P<id>\S+?):(?P<func>[^\s:()]+)"
_START = re.compile(
    _T + "→ " + _REF + r"\((?P<args>.*)\)(?: try=(?P<try>\d+))?(?: delayed=(?P<delayed>[\d.]+)s)?"
)
_DONE = re.compile(_T + "← " + _REF + r" ●(?: (?P<result>.*))?")
_RETRYING = re.compile(_T + "↻ " + _REF + r" (?P<why>retrying job in [\d.]+s)")
_CANCELLED = re.compile(_T + "↻ " + _REF + r" (?P<why>cancelled, will be run again)")
_FAILED = re.compile(_T + "! " + _REF + r" failed, (?P<exc>\w[\w.]*): ?(?P<msg>.*)")
_ABORTED = re.compile(_T + "⊘ " + _REF + r" aborted")
_NEVER_RAN = re.compile(
    _T + r"(?:! \S+ max retries \d+ exceeded|⊘ \S+ aborted before start)|job \S+ expired"
)
_STARTING = re.compile(r"Starting worker for \d+ functions?: .*")
_ARROWS = ("→", "←", "↻", "! ", "⊘")


class ArqLogReader(QueueLogReader):
    """One arq worker's log, read in order (see the module's docstring)."""

    fallback_prefix = "arq"
    separator = ": "

    def classify(self, message: str) -> tuple[str, dict[str, Any]] | None:
        message = message.rstrip()
        if (found := _START.fullmatch(message)) is not None:
            attrs: dict[str, Any] = {"arq.since_enqueue_s": float(found["t"])}
            if found["delayed"]:
                attrs["arq.delayed_s"] = float(found["delayed"])
            attrs.update(call_attrs(found["args"], "arq"))
            return "deliver", {"job_id": found["id"], "job_type": found["func"],
                               "attempt": int(found["try"] or 1), "attrs": attrs}
        if (found := _DONE.fullmatch(message)) is not None:
            return "ack", _fields(found, **{"arq.result": _result(found["result"])})
        if (found := _RETRYING.fullmatch(message)) is not None:
            return "nack", _fields(found, reason=f"Retry: {found['why']}")
        if (found := _CANCELLED.fullmatch(message)) is not None:
            return "nack", _fields(found, reason=found["why"])
        if (found := _FAILED.fullmatch(message)) is not None:
            reason = f"{found['exc']}: {found['msg']}".rstrip(": ")
            return "fail", _fields(found, reason=reason)
        if (found := _ABORTED.fullmatch(message)) is not None:
            return "fail", _fields(found, reason="aborted")
        if _NEVER_RAN.fullmatch(message):
            return None
        if _STARTING.fullmatch(message):
            return "started", {}
        if re.match(r"\s*\d+\.\d{2}s ", message) and any(a in message for a in _ARROWS):
            raise RecordError("an arq job line that cannot be read (cut short?)")
        return None


def _result(text: str | None) -> Any:
    """The returned value where its repr is a literal (`'k1'` -> k1), else its text."""
    if not text:
        return None
    value = call_attrs(text, "r").get("r.args.0")
    return text if value is None else value


def _fields(found: re.Match[str], **attrs: Any) -> dict[str, Any]:
    attrs = {k: v for k, v in attrs.items() if v is not None}
    attrs["arq.duration_s"] = float(found["t"])
    return {"job_id": found["id"], "job_type": found["func"], "attrs": attrs}


def sniff(head: bytes) -> bool:
    """Whether the first lines of a file are an arq worker's: `HH:MM:SS: Starting worker
    for N functions`, or a job line with arq's arrows."""
    for raw in head.splitlines()[:200]:
        line = raw.decode("utf-8", "replace").rstrip()
        if line.lstrip().startswith("{"):
            return False
        header = re.fullmatch(rf"({TIME_PATTERN}): (?P<message>.*)", line)
        if header is None:
            continue
        message = header["message"]
        if _STARTING.fullmatch(message) or _START.fullmatch(message) or _DONE.fullmatch(
            message
        ):
            return True
    return False
