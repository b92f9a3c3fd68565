"""The RQ lab's job (tests/test_rq_lab.py), run by real `rq worker` processes: it writes
its side effect to the lab's ledger (`DUPESCOPE_LAB_LEDGER`), then plays its fault on the
first run of its job id."""

from __future__ import annotations

import os
import sqlite3
import time

from support import ledger


def charge(key: str, fault: str = "none", pause: float = 0.3) -> str:
    """`fail_once`: raise after the effect on the first run; `crash_once`: wait after the
    effect on the first run, for the lab to SIGKILL this work-horse."""
    from rq import get_current_job

    path = os.environ["DUPESCOPE_LAB_LEDGER"]
    job = get_current_job()
    job_id = job.id if job is not None else ""
    run = ledger.new_run()
    ledger.write(path, "effect", key, job_id, run, os.environ.get("LAB_WORKER", ""))
    first = _effects(path, job_id) == 1
    time.sleep(pause)
    if first and fault == "fail_once":
        raise ValueError(f"card declined for {key}")
    if first and fault == "crash_once":
        time.sleep(60)  # killed here
    ledger.write(path, "done", key, job_id, run, os.environ.get("LAB_WORKER", ""))
    return key


def _effects(path: str, job_id: str) -> int:
    with sqlite3.connect(path, timeout=30) as db:
        return int(db.execute(
            "SELECT count(*) FROM ledger WHERE kind = 'effect' AND job_id = ?", (job_id,)
        ).fetchone()[0])
