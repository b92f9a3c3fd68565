"""The RQ lab: real `rq worker` processes (RQ 3.0, and RQ 2.0 whose lines and Redis
state differ) on the local Redis, a job that writes its side effect to a SQLite ledger,
and real faults: a producer that enqueues one order twice, a failure retried by RQ
(`Retry(max=1)`), and a work-horse SIGKILLed after its effect. The truth is the ledger's;
each source, alone, is scored on it: the workers' logs (`ingest`, the format told from
content) and RQ's state in Redis (`collect --rq-redis`, the collector restarted
mid-run). Both name the key through a mapping of the job's first argument."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ledger, queue_lab, scoring
from support.redis_db import REDIS_HOST, REDIS_PORT, claim_redis_db, release_redis_db

redis = pytest.importorskip("redis")
rq = pytest.importorskip("rq")

#: The `rq worker` of each RQ the lab runs: RQ 3 from dupescope's venv, RQ 2.0 (whose
#: log lines and Redis state differ) from the venv `make labs` creates.
RQ_WORKERS = {
    "3.0": Path(sys.executable).with_name("rq"),
    "2.0": queue_lab.ROOT / ".venv" / "labs" / "rq2" / "bin" / "rq",
}
WORKERS = 2
#: The plan: key -> the fault its job plays.
PLAN = {
    **{f"order-{n}": "none" for n in range(12)},
    "order-twice-1": "producer_retry",
    "order-twice-2": "producer_retry",
    "order-declined-1": "retry_after_failure",
    "order-declined-2": "retry_after_failure",
    "order-killed-1": "worker_crash",
}
FAULT_ARGUMENT = {"retry_after_failure": "fail_once", "worker_crash": "crash_once"}
LOG_CAUSES = {"producer_retry", "worker_crash", "retry_after_failure"}
#: RQ writes no result for a failed run it retries, so a killed work-horse's job with
#: retries left reads from Redis as a retry after failure (the logs tell it).
REDIS_CAUSES = {"producer_retry", "retry_after_failure"}


@dataclass
class Lab:
    truth: dict[str, str]
    log_rows: list[dict]
    redis_rows: list[dict]
    runs: dict[str, int]  # key -> how many runs ran its effect


@pytest.fixture(scope="module", params=sorted(RQ_WORKERS, reverse=True))
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Lab]:
    rq_worker = RQ_WORKERS[request.param]
    if not rq_worker.exists():
        pytest.skip(f"no rq worker at {rq_worker}: `make labs` creates RQ 2.0's")
    folder = tmp_path_factory.mktemp("rq-lab")
    db = claim_redis_db()
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    queue_name = f"lab-{os.getpid()}"
    path = folder / "ledger.sqlite"
    ledger.create(path)
    mapping = queue_lab.mapping_file(folder, "rq.args.0")
    workers: list[subprocess.Popen[bytes]] = []
    collect = ("--rq-redis", url, "--rq-interval", "0.05", "--mapping", str(mapping))
    try:
        with queue_lab.collector(folder / "redis-store", *collect):
            for n in range(WORKERS):
                log = open(folder / f"worker-{n}.log", "wb")  # noqa: SIM115 - the worker's
                workers.append(subprocess.Popen(
                    [str(rq_worker), "worker", "-u", url, queue_name],
                    stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                    env=queue_lab.lab_env(DUPESCOPE_LAB_LEDGER=str(path),
                                          LAB_WORKER=f"worker-{n}"),
                ))
            killed = _run_faults(client, queue_name, path)
        # The collector stops and starts again while the killed order's retry runs: it
        # takes up the runs it had seen start where it left them.
        with queue_lab.collector(folder / "redis-store", *collect):
            queue_lab.wait_for(lambda: _all_done(path), 60, "every order's last run")
            queue_lab.wait_for(lambda: _idle(client, queue_name), 30, "RQ to settle them")
            time.sleep(0.5)  # a few of the collector's polls after the last result
        queue_lab.stop(workers)
        logs = sorted(str(p) for p in folder.glob("worker-*.log"))
        queue_lab.dupescope("ingest", "--quiet", "--store", str(folder / "log-store"),
                            "--mapping", str(mapping), *logs)
        yield Lab(
            truth=queue_lab.truth(ledger.read(path), PLAN, killed),
            log_rows=queue_lab.duplicates(folder / "log-store"),
            redis_rows=queue_lab.duplicates(folder / "redis-store"),
            runs=ledger.effects_by_key(ledger.read(path)),
        )
    finally:
        queue_lab.stop(workers)
        for key in client.scan_iter("rq:*"):
            client.delete(key)
        release_redis_db(db)


def _run_faults(client: object, queue_name: str, path: Path) -> set[str]:
    """Enqueue every planned order (twice for a producer's retry); SIGKILL the work-horse
    of each order planned to crash once its effect is in the ledger. Returns the runs
    killed (the ledger's run ids)."""
    queue = rq.Queue(queue_name, connection=client)
    for key, fault in PLAN.items():
        argument = FAULT_ARGUMENT.get(fault, "none")
        retry = rq.Retry(max=1) if fault in FAULT_ARGUMENT else None
        for _ in range(2 if fault == "producer_retry" else 1):
            queue.enqueue("support.rq_lab_jobs.charge", key, argument, retry=retry)
    killed = set()
    for key, fault in PLAN.items():
        if fault == "worker_crash":
            queue_lab.wait_for(lambda key=key: queue_lab.effects(path, key) != [], 30,
                               f"{key}'s effect")
            effect = queue_lab.effects(path, key)[0]
            time.sleep(0.3)  # stuck after its effect for a while, then killed
            os.kill(effect.pid, signal.SIGKILL)
            killed.add(effect.run)
    return killed


def _idle(client: object, queue_name: str) -> bool:
    return not client.zcard(f"rq:wip:{queue_name}") and not client.llen(  # type: ignore[attr-defined]
        f"rq:queue:{queue_name}")


def _all_done(path: Path) -> bool:
    done = {row.key for row in ledger.read(path) if row.kind == "done"}
    return set(PLAN) <= done


def test_the_lab_played_every_fault(lab: Lab) -> None:
    assert set(lab.truth.values()) == {"producer_retry", "retry_after_failure",
                                       "worker_crash"}
    assert len(lab.truth) == 5


def test_the_workers_logs_find_every_duplicate_and_its_cause(lab: Lab) -> None:
    found = scoring.score(lab.log_rows, lab.truth, evidence=LOG_CAUSES)
    assert found.precision >= 0.99 and found.recall >= 0.99, found.summary()
    assert found.cause_accuracy >= 0.95 and found.cause_judged == len(lab.truth), (
        found.summary())


def test_rqs_state_in_redis_finds_every_duplicate(lab: Lab) -> None:
    found = scoring.score(lab.redis_rows, lab.truth, evidence=REDIS_CAUSES)
    assert found.precision >= 0.99 and found.recall >= 0.99, found.summary()
    assert found.cause_accuracy >= 0.95, found.summary()


def test_redis_reads_a_killed_work_horse_with_retries_left_as_a_retry(lab: Lab) -> None:
    said = {row["key"]: row["cause"] for row in lab.redis_rows}
    assert said["order-killed-1"] == "retry_after_failure"



def test_redis_counts_each_run_once_across_a_collector_restart(lab: Lab) -> None:
    for row in lab.redis_rows:
        assert row["executions"] == lab.runs[row["key"]], row["key"]
