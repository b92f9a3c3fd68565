"""The arq lab: three real arq 0.28 workers (from `.venv/labs/arq`, which `make test`
creates) on the local Redis, a job that writes its side effect to a SQLite ledger, and
real faults: a producer that enqueues one order twice, a job that asks for a retry
(`Retry`, logged `↻ ... retrying`), a job that blocks its worker past the job timeout (its
in-progress key expires and another worker starts the next try while it still runs), and
a worker SIGKILLed after its job's effect (the next try comes once the in-progress key
expires). The truth is the ledger's; the workers' logs alone are scored on it, the key
named through a mapping of the job's first argument."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ledger, queue_lab, scoring
from support.redis_db import REDIS_HOST, REDIS_PORT, claim_redis_db, release_redis_db

redis = pytest.importorskip("redis")

#: How long the hogging first try blocks its worker (tests/support/arq_lab_jobs.py).
HOG_SECONDS = 12.5

ARQ_VENV = queue_lab.ROOT / ".venv" / "labs" / "arq" / "bin"
WORKERS = 3
PLAN = {
    **{f"order-{n}": "none" for n in range(8)},
    "order-twice-1": "producer_retry",
    "order-twice-2": "producer_retry",
    "order-retried-1": "retry_after_failure",
    "order-retried-2": "retry_after_failure",
    "order-hogged": "visibility_timeout",
    "order-killed": "worker_crash",
}
FAULT_ARGUMENT = {"retry_after_failure": "retry", "visibility_timeout": "hog",
                  "worker_crash": "crash"}
LOG_CAUSES = {"producer_retry", "visibility_timeout", "worker_crash", "retry_after_failure"}


@dataclass
class Lab:
    truth: dict[str, str]
    rows: list[dict]
    folder: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not (ARQ_VENV / "arq").exists():
        pytest.skip(f"no arq lab venv at {ARQ_VENV}: `make labs` creates it")
    folder = tmp_path_factory.mktemp("arq-lab")
    db = claim_redis_db()
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    path = folder / "ledger.sqlite"
    ledger.create(path)
    env = queue_lab.lab_env(DUPESCOPE_LAB_LEDGER=str(path), LAB_REDIS_DB=str(db),
                            LAB_QUEUE=f"arq:lab-{os.getpid()}")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for n in range(WORKERS):
            log = open(folder / f"worker-{n}.log", "wb")  # noqa: SIM115 - the worker's
            workers.append(subprocess.Popen(
                [str(ARQ_VENV / "arq"), "support.arq_lab_jobs.WorkerSettings"],
                stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                env={**env, "LAB_WORKER": f"worker-{n}"},
            ))
        killed = _run_faults(env, path)
        queue_lab.stop(workers)
        mapping = queue_lab.mapping_file(folder, "arq.args.0")
        logs = sorted(str(p) for p in folder.glob("worker-*.log"))
        queue_lab.dupescope("ingest", "--quiet", "--store", str(folder / "store"),
                            "--mapping", str(mapping), *logs)
        yield Lab(queue_lab.truth(ledger.read(path), PLAN, killed),
                  queue_lab.duplicates(folder / "store"), folder)
    finally:
        queue_lab.stop(workers)
        for key in client.scan_iter("arq:*"):
            client.delete(key)
        release_redis_db(db)


def _enqueue(env: dict[str, str], plan: dict[str, str]) -> None:
    jobs = []
    for key, fault in plan.items():
        jobs.extend([["charge", key, FAULT_ARGUMENT.get(fault, "none")]]
                    * (2 if fault == "producer_retry" else 1))
    subprocess.run([str(ARQ_VENV / "python"), "-m", "support.arq_lab_jobs", json.dumps(jobs)],
                   env=env, check=True, timeout=60)


def _run_faults(env: dict[str, str], path: Path) -> set[str]:
    """The quick faults first, then the hog and the crash together: each blocks a worker
    (one job at a time each), the third runs their next tries. Returns the runs killed
    (the ledger's run ids: a worker runs one job at a time)."""
    quick = {k: f for k, f in PLAN.items() if f not in ("visibility_timeout", "worker_crash")}
    _enqueue(env, quick)
    queue_lab.wait_for(lambda: _done(path) >= set(quick), 60, "the quick orders")
    _enqueue(env, {"order-hogged": PLAN["order-hogged"], "order-killed": PLAN["order-killed"]})
    queue_lab.wait_for(lambda: queue_lab.effects(path, "order-killed") != [], 30,
                       "order-killed's effect")
    effect = queue_lab.effects(path, "order-killed")[0]
    os.kill(effect.pid, signal.SIGKILL)
    queue_lab.wait_for(lambda: _done(path) >= set(PLAN), 60,
                       "the hogged and killed orders' next tries")
    # The hogged first try ends (arq logs its TimeoutError) once its loop is free again.
    hogged_at = queue_lab.effects(path, "order-hogged")[0].t
    time.sleep(max(0.0, hogged_at + HOG_SECONDS + 0.5 - time.time()))
    return {effect.run}


def _done(path: Path) -> set[str]:
    return {row.key for row in ledger.read(path) if row.kind == "done"}


def test_the_lab_played_every_fault(lab: Lab) -> None:
    assert set(lab.truth.values()) == LOG_CAUSES
    assert len(lab.truth) == 6


def test_the_workers_logs_find_every_duplicate_and_its_cause(lab: Lab) -> None:
    found = scoring.score(lab.rows, lab.truth, evidence=LOG_CAUSES)
    assert found.precision >= 0.99 and found.recall >= 0.99, found.summary()
    assert found.cause_accuracy >= 0.95 and found.cause_judged == len(lab.truth), (
        found.summary())


def test_a_try_after_the_in_progress_key_expired_carries_its_try_number(lab: Lab) -> None:
    hogged = next(row for row in lab.rows if row["key"] == "order-hogged")
    assert hogged["executions"] == 2
    timeline = json.loads(queue_lab.dupescope(
        "timeline", "order-hogged", "--store", str(lab.folder / "store"), "--format", "json"))
    delivered = [e for e in timeline if e["event"] == "deliver"]
    assert sorted(e["delivery_attempt"] for e in delivered) == [1, 2]
