"""The arq lab's job and workers' settings (tests/test_arq_lab.py), run by real arq 0.28
workers from their own venv (arq needs redis<6): the job writes its side effect to the
lab's ledger (`DUPESCOPE_LAB_LEDGER`), then plays its fault on its first try.

`python -m support.arq_lab_jobs '[["charge", "order-1", "none"], ...]'` is the lab's
producer: it enqueues each job (each its own job id)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from arq import Retry
from arq.connections import RedisSettings

from support import ledger

#: How long a hogging first try blocks its worker's event loop: past its in-progress
#: key's expiry (job_timeout + 10 s), so that another worker starts the next try meanwhile.
HOG_SECONDS = 12.5


async def charge(ctx: dict[str, Any], key: str, fault: str = "none") -> str:
    """`retry`: ask arq for a retry after the effect; `hog`: block the loop after the
    effect, outliving the job timeout; `crash`: block after the effect until the lab
    SIGKILLs this worker. Each on the first try only."""
    path = os.environ["DUPESCOPE_LAB_LEDGER"]
    worker = os.environ.get("LAB_WORKER", "")
    run = ledger.new_run()
    ledger.write(path, "effect", key, ctx["job_id"], run, worker)
    first = ctx["job_try"] == 1
    if first and fault == "retry":
        raise Retry(defer=0.1)
    if first and fault == "hog":
        time.sleep(HOG_SECONDS)  # blocks the loop: arq cannot cancel it at its timeout
    if first and fault == "crash":
        time.sleep(60)  # killed here
    await asyncio.sleep(0.05)
    ledger.write(path, "done", key, ctx["job_id"], run, worker)
    return key


def _redis() -> RedisSettings:
    return RedisSettings(host="127.0.0.1", port=6379,
                         database=int(os.environ.get("LAB_REDIS_DB", "0")))


class WorkerSettings:
    functions = [charge]
    redis_settings = _redis()
    queue_name = os.environ.get("LAB_QUEUE", "arq:queue")
    job_timeout = 1  # its in-progress key expires 11 s after a try starts
    max_jobs = 1
    poll_delay = 0.05
    keep_result = 60


async def _enqueue(jobs: list[list[str]]) -> None:
    from arq import create_pool

    pool = await create_pool(_redis(), default_queue_name=WorkerSettings.queue_name)
    for function, *args in jobs:
        await pool.enqueue_job(function, *args)
    await pool.aclose()


if __name__ == "__main__":
    asyncio.run(_enqueue(json.loads(sys.argv[1])))
