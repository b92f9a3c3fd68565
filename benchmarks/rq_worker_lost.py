"""RQ: a whole worker SIGKILLed (its main process and its work-horse) after its job's side
effect. RQ runs the job again only once its run's heartbeat lapsed
(`--job-monitoring-interval` + 60 s) and another worker, between two jobs, cleans the
started registry (`--maintenance-interval`); the
logs show only the dead run's start, RQ's Redis state an abandoned run. Each source is
scored alone against the side-effect ledger, as in tests/test_rq_lab.py, which this
longer variant completes (it takes 70-80 s).

    python -m benchmarks rq_worker_lost
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import redis  # noqa: E402
import rq  # noqa: E402
from support import ledger, queue_lab, scoring  # noqa: E402
from support.redis_db import (  # noqa: E402
    REDIS_HOST,
    REDIS_PORT,
    claim_redis_db,
    release_redis_db,
)

RQ_WORKER = Path(sys.executable).with_name("rq")
KEYS = [f"order-{n}" for n in range(6)]
LOST = "order-lost"


def main() -> None:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="rq-worker-lost-"))
    db = claim_redis_db()
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    path = folder / "ledger.sqlite"
    ledger.create(path)
    mapping = queue_lab.mapping_file(folder, "rq.args.0")
    queue_name = f"lost-{os.getpid()}"
    workers: dict[str, subprocess.Popen[bytes]] = {}
    started = time.monotonic()
    try:
        with queue_lab.collector(folder / "redis-store", "--rq-redis", url, "--rq-interval",
                                 "0.05", "--mapping", str(mapping)):
            for n in range(2):
                name = f"worker-{n}"
                log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 - the worker's
                workers[name] = subprocess.Popen(
                    [str(RQ_WORKER), "worker", "-u", url, "--job-monitoring-interval", "1",
                     "--maintenance-interval", "1", queue_name],
                    stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                    env=queue_lab.lab_env(DUPESCOPE_LAB_LEDGER=str(path), LAB_WORKER=name),
                )
            queue = rq.Queue(queue_name, connection=client)
            for key in KEYS:
                queue.enqueue("support.rq_lab_jobs.charge", key)
            queue.enqueue("support.rq_lab_jobs.charge", LOST, "crash_once",
                          retry=rq.Retry(max=1))
            queue_lab.wait_for(lambda: queue_lab.effects(path, LOST) != [], 60, "the effect")
            effect = queue_lab.effects(path, LOST)[0]
            time.sleep(0.3)
            os.kill(workers[effect.worker].pid, signal.SIGKILL)  # the main process
            os.kill(effect.pid, signal.SIGKILL)  # and its work-horse
            killed_at = time.monotonic()
            # RQ cleans its started registry only in a worker's loop between two jobs:
            # other jobs keep coming, as in production.
            for tick in range(180):
                if len(queue_lab.effects(path, LOST)) == 2:
                    break
                queue.enqueue("support.rq_lab_jobs.charge", f"tick-{tick}")
                time.sleep(1.0)
            else:
                raise AssertionError("RQ did not run the abandoned job again in 180 s")
            again = time.monotonic() - killed_at
            queue_lab.wait_for(lambda: LOST in {r.key for r in ledger.read(path)
                                                if r.kind == "done"}, 30, "its end")
            time.sleep(0.5)
        queue_lab.stop(workers.values())
        logs = sorted(str(p) for p in folder.glob("worker-*.log"))
        queue_lab.dupescope("ingest", "--quiet", "--store", str(folder / "log-store"),
                            "--mapping", str(mapping), *logs)
        truth = queue_lab.truth(ledger.read(path), {}, {effect.run})
        print(f"the job ran again {again:.1f} s after its worker was killed; "
              f"the run took {time.monotonic() - started:.1f} s")
        for source, store in (("rq-log", "log-store"), ("rq-redis", "redis-store")):
            found = scoring.score(queue_lab.duplicates(folder / store), truth)
            print(f"{source}: {found.summary()}")
    finally:
        queue_lab.stop(workers.values())
        for key in client.scan_iter("rq:*"):
            client.delete(key)
        release_redis_db(db)


if __name__ == "__main__":
    main()
