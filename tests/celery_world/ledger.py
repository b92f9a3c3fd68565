"""The truth ledger: one JSON line per side effect and per finished run, appended by the
tasks themselves, so what really ran is known whatever the telemetry lost."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import orjson


@dataclass(frozen=True)
class Entry:
    """One line: `effect` (the business effect ran) or `done` (the body returned)."""

    kind: str
    key: str
    task_id: str
    run: str  # one id per run of the body, shared by its `effect` and `done`
    node: str  # the Celery worker's nodename
    pid: int
    t: float  # time.time() on the worker


def append(path: str | Path, entry: Entry) -> None:
    """One write on an O_APPEND descriptor: lines from concurrent processes never mix."""
    line = orjson.dumps(entry.__dict__) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read(path: str | Path) -> list[Entry]:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return [Entry(**orjson.loads(line)) for line in data.splitlines() if line.strip()]


def effect_entry(kind: str, key: str, task_id: str, run: str, node: str) -> Entry:
    return Entry(kind, key, task_id, run, node, os.getpid(), time.time())
