"""The side-effect ledger of a queue lab: the jobs themselves write one row when their
business effect runs and one when their body returns, into SQLite, so what really ran is
known whatever the telemetry lost. Jobs in other languages write the same table.

    CREATE TABLE ledger (kind TEXT, key TEXT, job_id TEXT, run TEXT, worker TEXT,
                         pid INTEGER, t REAL)

`kind` is `effect` or `done`; `run` is one id per run of the body, shared by its two rows;
`t` is the Unix time in seconds on the worker.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ledger (kind TEXT, key TEXT, job_id TEXT, run TEXT, "
    "worker TEXT, pid INTEGER, t REAL)"
)


@dataclass(frozen=True)
class Row:
    kind: str
    key: str
    job_id: str
    run: str
    worker: str
    pid: int
    t: float


def create(path: str | Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(SCHEMA)


def write(path: str | Path, kind: str, key: str, job_id: str, run: str, worker: str) -> None:
    """One row, committed before it returns: a process killed after this call has left it.
    The busy timeout lets many worker processes write one file."""
    with sqlite3.connect(path, timeout=30) as db:
        db.execute(
            "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
            (kind, key, job_id, run, worker, os.getpid(), time.time()),
        )


def new_run() -> str:
    return uuid.uuid4().hex


def read(path: str | Path) -> list[Row]:
    if not Path(path).exists():
        return []
    with sqlite3.connect(path, timeout=30) as db:
        return [Row(*r) for r in db.execute("SELECT * FROM ledger ORDER BY t")]


def effects_by_key(rows: list[Row]) -> dict[str, int]:
    """How many runs of each key ran its effect: above one, the key ran twice."""
    runs: dict[str, set[str]] = {}
    for row in rows:
        if row.kind == "effect":
            runs.setdefault(row.key, set()).add(row.run)
    return {key: len(r) for key, r in runs.items()}
