"""The BullMQ lab: real Node workers (tests/bullmq_lab, `bullmq` pinned in its lockfile,
installed by `make test` with `npm ci`) on a Redis database of the test's own, and the
side-effect ledger their jobs append to (JSON lines, loaded into support/ledger's table).

The scenario (tests/bullmq_lab/producer.js) and the cause each duplicate truly has:

- ok-N: one run each; not a duplicate.
- stall-1: its body blocks the worker's event loop past the lock, and another worker
  re-runs it meanwhile: visibility_timeout.
- crash-1: its worker is SIGKILLed after the effect; another worker re-runs it once the
  stall is noticed: worker_crash.
- retry-backoff-1, retry-now-1: the body throws after the effect, and BullMQ retries it
  (with and without a backoff): retry_after_failure.
- twice-1: the producer adds the same order twice: producer_retry.
- reid-1: a custom jobId added again after removeOnComplete deleted the first job:
  producer_retry.
- dedup-again-1: a deduplication id added again after its first job finished:
  producer_retry.
- held-1, dedup-held-1: added twice while the first is still there; BullMQ keeps one:
  not a duplicate.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import redis
from support import ledger
from support.redis_db import REDIS_HOST, REDIS_PORT, claim_redis_db, release_redis_db

LAB = Path(__file__).resolve().parent / "bullmq_lab"
#: The true cause of each duplicate a round of the faults makes, by its key's stem.
CAUSES_BY_STEM = {
    "stall": "visibility_timeout",
    "crash": "worker_crash",
    "retry-backoff": "retry_after_failure",
    "retry-now": "retry_after_failure",
    "twice": "producer_retry",
    "reid": "producer_retry",
    "dedup-again": "producer_retry",
}
#: Keys a round runs once, its duplicates included.
KEYS_PER_ROUND = len(CAUSES_BY_STEM) + 2  # and held, dedup-held


def truth(rounds: int = 1) -> dict[str, str]:
    """Key -> true cause, for the duplicates of `rounds` rounds of the faults."""
    return {f"{stem}-{r}": cause for r in range(1, rounds + 1)
            for stem, cause in CAUSES_BY_STEM.items()}


TRUTH = truth(1)
#: The mapping file that names the jobs' key in their data.
MAPPING = '[fields]\nidempotency_key = "order_id"\n'


def lab_missing() -> str | None:
    """Why the lab cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed: the BullMQ lab needs Node (apt-get install nodejs)"
    if not (LAB / "node_modules" / "bullmq").is_dir():
        return "tests/bullmq_lab/node_modules is missing: run `make test` (npm ci there)"
    return None


def load_ledger(lines: Path, db: Path) -> list[ledger.Row]:
    """The jobs' JSON lines into the ledger's SQLite table; its rows."""
    ledger.create(db)
    rows = []
    if lines.exists():
        for line in lines.read_bytes().splitlines():
            if line.strip():
                r = orjson.loads(line)
                rows.append((r["kind"], r["key"], r["job_id"], r["run"], r["worker"],
                             r["pid"], r["t"]))
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return ledger.read(db)


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """The condition's first true value, polled every 0.1 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Lab:
    """Three named workers on a queue of a claimed Redis database, and the producer."""

    def __init__(self, root: Path, *, queue: str = "billing", prefix: str = "bull",
                 lock_ms: int = 1000, block_ms: int = 6000, plain: int = 40,
                 rounds: int = 1) -> None:
        self.root = root
        self.db = claim_redis_db()
        self.url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.db}"
        self.queue, self.prefix = queue, prefix
        self.lines = root / "ledger.jsonl"
        self.env = dict(
            os.environ, REDIS_URL=self.url, PREFIX=prefix, QUEUE=queue,
            LEDGER=str(self.lines), LOCK_MS=str(lock_ms), STALL_MS=str(lock_ms),
            PLAIN=str(plain), BLOCK_MS=str(block_ms), ROUNDS=str(rounds),
        )
        #: Keys with a `done` row once the scenario is over.
        self.keys = plain + KEYS_PER_ROUND * rounds
        self.workers: list[subprocess.Popen[bytes]] = []
        self.log = open(root / "lab.log", "wb")  # noqa: SIM115 - closed in cleanup

    def redis(self) -> redis.Redis:
        return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.db, decode_responses=True)

    def start_workers(self, count: int = 3) -> None:
        names = tuple(f"w{i}" for i in range(1, count + 1))
        for name in names:
            self.workers.append(subprocess.Popen(
                ["node", "worker.js"], cwd=LAB, env=dict(self.env, NAME=name),
                stdout=self.log, stderr=subprocess.STDOUT,
            ))
        client = self.redis()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            named = [c for c in client.client_list() if ":w:" in (c.get("name") or "")
                     and c.get("db") == str(self.db)]
            if len(named) >= len(names):
                return
            time.sleep(0.05)
        raise AssertionError(f"the workers did not connect: {self.tail()}")

    def produce(self) -> None:
        subprocess.run(["node", "producer.js"], cwd=LAB, env=self.env, check=True,
                       stdout=self.log, stderr=subprocess.STDOUT, timeout=60)

    def wait_done(self, timeout: float = 40.0) -> None:
        """Until every key has a `done` row and the queue has nothing left to run."""
        deadline = time.monotonic() + timeout
        client = self.redis()
        base = f"{self.prefix}:{self.queue}"
        while time.monotonic() < deadline:
            done = {r["key"] for r in self._lines() if r["kind"] == "done"}
            idle = (client.llen(f"{base}:wait") == 0 and client.llen(f"{base}:active") == 0
                    and client.zcard(f"{base}:delayed") == 0)
            if len(done) >= self.keys and idle:
                return
            time.sleep(0.1)
        raise AssertionError(f"the scenario did not finish: {self.tail()}")

    def _lines(self) -> list[dict[str, object]]:
        if not self.lines.exists():
            return []
        return [orjson.loads(line) for line in self.lines.read_bytes().splitlines() if line]

    def tail(self) -> str:
        self.log.flush()
        return (self.root / "lab.log").read_text()[-3000:]

    def cleanup(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait(10)
        self.log.close()
        client = self.redis()
        client.flushdb()  # the claimed database only
        release_redis_db(self.db)
