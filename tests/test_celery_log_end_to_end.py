"""A real Celery 5 prefork worker on the real Redis broker, its plain log loaded with
`dupescope ingest`: each duplicate it made is found, with the cause its log shows."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from celery_support import celery_run

ROOT = Path(__file__).resolve().parents[1]
ID = r"\[{}\]"


def _dupescope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dupescope.cli", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=True,
    )


def test_a_real_workers_log_names_each_duplicate_and_its_cause(tmp_path: Path) -> None:
    with celery_run(tmp_path) as run:
        tasks = {}
        with run.worker() as worker:
            run.wait_for(r" ready\.$")
            tasks["add"] = run.send("add", 1, 2)
            tasks["broken"] = run.send("broken")
            tasks["flaky"] = run.send("flaky")
            tasks["crash"] = run.send("crash")
            run.wait_for(ID.format(tasks["flaky"]) + " succeeded in")
            run.wait_for(ID.format(tasks["crash"]) + " succeeded in")
            # (The crashed task may be handed out again by the visibility timeout before
            # the worker logs WorkerLostError: it still reads as a crash.)
            # Outlives the 2 s visibility timeout: handed out again while it runs.
            tasks["slow"] = run.send("slow", 4.0)
            run.wait_for(ID.format(tasks["slow"]) + " succeeded in", count=2)
            # The worker is SIGKILLed while one task runs and after another succeeded,
            # before its ack: both are handed out again once the worker is back.
            tasks["running"] = run.send("slow", 30.0)
            run.wait_for(ID.format(tasks["running"]) + " received")
            tasks["unacked"] = run.send("unacked")
            worker.wait(30)
        with run.worker():
            run.wait_for(r" ready\.$", count=2)
            run.wait_for(ID.format(tasks["running"]) + " succeeded in")
            run.wait_for(ID.format(tasks["unacked"]) + " succeeded in", count=2)
        store = tmp_path / "store"
        loaded = _dupescope("ingest", "--store", str(store), str(run.log))
        found = json.loads(_dupescope("duplicates", "--store", str(store), "--format",
                                      "json").stdout)
    assert "0 rejected" in loaded.stderr
    causes = {row["key"]: row["cause"] for row in found}
    # Every duplicate and only those (the task that ran once, and the one that failed
    # once, are none), each with the cause the log shows.
    assert causes == {
        tasks["flaky"]: "retry_after_failure",
        tasks["crash"]: "worker_crash",
        tasks["slow"]: "visibility_timeout",
        tasks["running"]: "worker_crash",
        tasks["unacked"]: "broker_redelivery",
    }
    assert {row["key"]: row["job_type"] for row in found}[tasks["crash"]] == (
        "celery_log_app.crash"
    )
    assert all(row["executions"] == 2 for row in found)


def test_a_log_format_with_the_pid_names_the_worker_node_and_pid(tmp_path: Path) -> None:
    fmt = "%(asctime)s %(levelname)s %(processName)s pid=%(process)d | %(message)s"
    with celery_run(tmp_path) as run:
        run.env["DUPESCOPE_CELERY_LOG_FORMAT"] = fmt
        with run.worker() as worker:
            run.wait_for(r" ready\.$")
            task = run.send("add", 1, 2)
            run.wait_for(ID.format(task) + " succeeded in")
        store = tmp_path / "store"
        _dupescope("ingest", "--store", str(store), "--celery-log-format", fmt, str(run.log))
        events = json.loads(_dupescope("timeline", task, "--store", str(store), "--format",
                                       "json").stdout)
    assert [event["event"] for event in events] == ["deliver", "ack"]
    node = f"dupescope-test@{socket.gethostname()}"
    assert {event["worker_id"] for event in events} == {f"{node}:{worker.pid}"}
