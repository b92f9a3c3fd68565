"""The scenario's producer, a process of its own (as producers are), so that its
instrumentation never touches the test process: `python -m celery_world.produce`.

Each line on stdin is a plan, a JSON list of `{"key", "behaviour", "resend_after_s"}`. A
send with `resend_after_s` waits that long for the result and, timed out, sends the same
key again as a new task (a producer retry). For each plan it prints one JSON line per task
sent, then `sent`. At the end of stdin it flushes its spans and leaves.
"""

from __future__ import annotations

import sys
import time

import orjson

from celery_world.app import PROVIDERS, effect


def send(key: str, behaviour: str) -> str:
    result = effect.apply_async(kwargs={"idempotency_key": key, "behaviour": behaviour})
    print(orjson.dumps({"key": key, "task_id": result.id, "behaviour": behaviour}).decode())
    return result.id


def answered(task_id: str, timeout_s: float) -> bool:
    """Whether the result came within the timeout (polled: `get(timeout=)` can overrun
    its timeout while it blocks on the backend)."""
    result = effect.AsyncResult(task_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result.ready():
            return True
        time.sleep(0.05)
    return result.ready()


def produce(plan: list[dict]) -> None:
    for item in plan:
        task_id = send(item["key"], item["behaviour"])
        wait = item.get("resend_after_s")
        if wait is not None and not answered(task_id, wait):
            send(item["key"], item["behaviour"])
    print("sent", flush=True)


def main() -> None:
    for line in sys.stdin:
        produce(orjson.loads(line))
    for provider in PROVIDERS:
        provider.shutdown()


if __name__ == "__main__":
    main()
