"""What the RQ and arq labs share: the truth from their ledger, waiting on it, and
dupescope's answers read through its command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from support import ledger

ROOT = Path(__file__).resolve().parents[2]
DUPESCOPE = [sys.executable, "-m", "dupescope.cli"]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def effects(path: Path, key: str) -> list[ledger.Row]:
    return [r for r in ledger.read(path) if r.kind == "effect" and r.key == key]


def truth(
    rows: Iterable[ledger.Row], planned: dict[str, str], killed: set[str]
) -> dict[str, str]:
    """Every key whose effect ran more than once -> its true cause: two job ids are a
    producer's retry; a run after one the lab killed (`killed`: ledger run ids), a worker
    crash; else the fault the lab planned for that key."""
    runs: dict[str, list[ledger.Row]] = {}
    for row in rows:
        if row.kind == "effect":
            runs.setdefault(row.key, []).append(row)
    found = {}
    for key, effects_ in runs.items():
        if len({r.run for r in effects_}) < 2:
            continue
        effects_.sort(key=lambda r: r.t)
        if len({r.job_id for r in effects_}) > 1:
            found[key] = "producer_retry"
        elif any(r.run in killed for r in effects_[:-1]):
            found[key] = "worker_crash"
        else:
            found[key] = planned.get(key, "unknown")
    return found


def dupescope(*args: str) -> str:
    """The command line, run in this process (no interpreter to start)."""
    from click.testing import CliRunner

    from dupescope.cli import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result.stdout


def duplicates(store: Path) -> list[dict]:
    return list(json.loads(dupescope("duplicates", "--store", str(store), "--format", "json")))


def mapping_file(folder: Path, field: str) -> Path:
    """A mapping that names one of a job's arguments as its idempotency key."""
    path = folder / "mapping.toml"
    path.write_text(f'[fields]\nidempotency_key = "{field}"\n')
    return path


@contextmanager
def collector(store: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`dupescope collect` with no receivers but the sources in `args`, until the block
    ends (SIGTERM: it drains what it read)."""
    process = subprocess.Popen(
        [*DUPESCOPE, "collect", "--store", str(store), "--http-port", "-1", "--grpc-port",
         "-1", "--compact-every", "0", *args],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "listening" in line:
                break
        else:
            raise AssertionError("the collector ended before it listened")
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop(processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process the lab started, then wait for it (SIGKILL after 10 s)."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def lab_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "tests")
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave in the order written
    env.update(extra)
    return env
