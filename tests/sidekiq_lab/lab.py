"""The Sidekiq lab: real Sidekiq 6.4 processes (Debian's ruby-sidekiq) on the local Redis,
in a database of the lab's own, running the jobs of app.rb with three faults:

- a job that fails once, then succeeds on its retry (retry_after_failure);
- a job still running when its process is stopped with a short `-t`: Sidekiq pushes it
  back to Redis and another process runs it again from its start (worker_crash);
- a producer that pushes the same work twice, as two jids (producer_retry): once for
  jobs that succeed (their logs never show their args), once for jobs that fail once.

Process A (one thread) takes the slow job first and writes Sidekiq's default format;
process B runs the rest and writes its JSON format. The jobs write a
side-effect ledger (JSON lines: tests/support/ledger.py's rows, and `raised` for a run
whose body raised), from which the truth is built, whatever the logs say.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent



def plan(scale: int = 1) -> list[tuple[str, str]]:
    """(key, behaviour) in push order; a key listed twice is pushed twice (two jids). The
    slow jobs come first, one for each of process A's threads. `scale` multiplies every
    group (benchmarks/queue_labs.py runs larger ones)."""
    suffix = [""] if scale == 1 else [f"-{n}" for n in range(scale)]
    return [
        *((f"order-slow{s}", "slow") for s in suffix),
        *((f"order-retry-{i}{s}", "fail_once") for s in suffix for i in (1, 2)),
        *((f"order-{i}{s}", "normal") for s in suffix for i in range(1, 7)),
        *((f"order-twice{s}", "normal") for s in suffix for _ in range(2)),
        *((f"order-twice-failing{s}", "fail_once") for s in suffix for _ in range(2)),
    ]



@dataclass(frozen=True)
class Run:
    """One run of a job's body, from the ledger."""

    key: str
    job_id: str
    run: str
    t: float
    done: bool
    raised: bool


@dataclass
class Lab:
    logs: list[Path]
    pushes: list[tuple[str, str]]  # (key, jid)
    runs: list[Run]
    seconds: float

    def key_of(self) -> dict[str, str]:
        return {jid: key for key, jid in self.pushes}


def available() -> str | None:
    """Why the lab cannot run here, or None."""
    if shutil.which("sidekiq") is None or shutil.which("ruby") is None:
        return "Debian's ruby-sidekiq is not installed (make test installs it as root)"
    return None


def _sidekiq(
    env: dict[str, str], log: Path, queue: str, json_logs: bool, threads: int
) -> subprocess.Popen:
    env = {**env, "LAB_JSON_LOGS": "1" if json_logs else "0"}
    with open(log, "ab") as out, open(log.with_suffix(".stderr"), "ab") as err:
        return subprocess.Popen(
            ["sidekiq", "-r", str(HERE / "app.rb"), "-q", queue, "-c", str(threads), "-t", "1"],
            env=env, stdout=out, stderr=err,
        )


def read_runs(ledger: Path) -> list[Run]:
    rows = [orjson.loads(line) for line in ledger.read_bytes().splitlines() if line.strip()]
    runs: dict[str, dict] = {}
    for row in rows:
        entry = runs.setdefault(row["run"], {"key": row["key"], "job_id": row["job_id"],
                                             "t": row["t"], "done": False, "raised": False})
        if row["kind"] == "effect":
            entry["t"] = row["t"]
        entry["done"] |= row["kind"] == "done"
        entry["raised"] |= row["kind"] == "raised"
    return sorted((Run(run=run, **entry) for run, entry in runs.items()), key=lambda r: r.t)


def truth(runs: list[Run]) -> dict[str, str]:
    """key -> cause, for the keys whose effect ran more than once: two jids is a producer
    retry; else what ended the run before the second: it raised (a retry after failure),
    it returned (a broker redelivery), or neither (its process let it go: a lost worker)."""
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(run.key, []).append(run)
    causes = {}
    for key, key_runs in by_key.items():
        if len(key_runs) < 2:
            continue
        if len({run.job_id for run in key_runs}) > 1:
            causes[key] = "producer_retry"
            continue
        first = key_runs[0]
        causes[key] = (
            "retry_after_failure" if first.raised
            else "broker_redelivery" if first.done else "worker_crash"
        )
    return causes


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"sidekiq lab: {what} within {timeout} s")
        time.sleep(0.1)


def run(workdir: Path, redis_db: int, queue: str, scale: int = 1) -> Lab:
    """The scenario, start to end (about 8 s at scale 1)."""
    jobs = plan(scale)
    started = time.monotonic()
    ledger = workdir / "ledger.jsonl"
    ledger.touch()
    env = {
        **os.environ,
        "LAB_REDIS_URL": f"redis://127.0.0.1:6379/{redis_db}",
        "LAB_LEDGER": str(ledger),
        "LAB_QUEUE": queue,
        "RUBYOPT": "-W0",
    }
    logs = [workdir / "sidekiq-a.log", workdir / "sidekiq-b.log"]
    # A runs a thread per slow job, all of them busy: an idle thread of a stopping process
    # can take a job its process just pushed back and lose it when it is killed
    # (BasicFetch's own gap), which would leave nothing to run again.
    a = _sidekiq(env, logs[0], queue, json_logs=False, threads=scale)
    b: subprocess.Popen | None = None
    try:
        produced = subprocess.run(
            ["ruby", str(HERE / "produce.rb"), *(f"{k}:{b}" for k, b in jobs)],
            env=env, capture_output=True, check=True, timeout=60,
        )
        pushes = [tuple(line.split()) for line in produced.stdout.decode().splitlines()]
        assert len(pushes) == len(jobs), produced.stderr
        slow = {key for key, behaviour in jobs if behaviour == "slow"}
        _wait(lambda: {r.key for r in read_runs(ledger)} >= slow, 30, "the slow jobs started")
        b = _sidekiq(env, logs[1], queue, json_logs=True, threads=3 * scale)
        time.sleep(1.0)
        a.send_signal(signal.SIGTERM)  # -t 1: the slow job is pushed back after ~1.5 s
        a.wait(30)
        jids = {jid for _, jid in pushes}
        _wait(lambda: {r.job_id for r in read_runs(ledger) if r.done} >= jids, 60,
              "every job done")
    finally:
        for process in (a, b):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in (a, b):
            if process is not None:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
    return Lab(logs, [(k, j) for k, j in pushes], read_runs(ledger),
               time.monotonic() - started)
