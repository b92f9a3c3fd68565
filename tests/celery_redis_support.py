"""A Celery app on the real Redis broker, instrumented with opentelemetry-instrumentation-
celery alone, for end-to-end tests; run as a script it is the worker process.

Each test gets its own key prefix (every broker key, the queue's included) and queue name,
so tests share the Redis server with anything else. The task counts its runs in a Redis
hash beside them: the ledger the test compares the forensics with. The first run of an
order named `slow-...` takes SLOW_S, of one named `hang-...` HANG_S (long enough to kill
its worker in the middle).

    python celery_redis_support.py <redis url> <prefix> <OTLP traces url> <hostname> <vt s>
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import redis
from celery import Celery
from celery_worker_support import WorkerProcess, delete_redis_keys

TASK = "billing.charge"
SLOW_S, HANG_S = 10.0, 120.0


def make_app(url: str, prefix: str, visibility_timeout_s: float = 3600) -> Celery:
    app = Celery(f"otel-{prefix}", broker=url, set_as_current=True)
    app.conf.update(
        task_default_queue=f"{prefix}queue",
        task_acks_late=True,
        task_ignore_result=True,
        worker_enable_remote_control=False,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "global_keyprefix": prefix, "visibility_timeout": visibility_timeout_s,
            "polling_interval": 0.05,
            # Unacked messages past their timeout are restored within a second.
            "unacked_restore_interval": 1, "unacked_restore_throttle": 1,
        },
    )
    ledger = redis.Redis.from_url(url)

    @app.task(name=TASK, shared=False)
    def charge(order_id: str) -> None:
        runs = ledger.hincrby(f"{prefix}ledger", order_id, 1)
        if runs == 1 and order_id.startswith(("slow-", "hang-")):
            time.sleep(SLOW_S if order_id.startswith("slow-") else HANG_S)

    return app


def ledger(url: str, prefix: str) -> dict[str, int]:
    found = redis.Redis.from_url(url).hgetall(f"{prefix}ledger")
    return {k.decode(): int(v) for k, v in found.items()}


def clean(url: str, prefix: str) -> None:
    """Deletes every key the test made (all of them under its prefix)."""
    delete_redis_keys(redis.Redis.from_url(url), f"{prefix}*")


class Worker(WorkerProcess):
    """The worker as its own process, exporting its spans over OTLP/HTTP. `stop` is a
    warm shutdown (the running task finishes, the spans are flushed at exit); `kill` a
    SIGKILL (the running task never finishes, its spans are never exported)."""

    def __init__(self, url: str, prefix: str, traces_url: str, hostname: str,
                 visibility_timeout_s: float = 3600) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
               # host.name and process.pid on the resource: the worker_id is host:pid.
               "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "otel,host,process"}
        super().__init__(
            [sys.executable, __file__, url, prefix, traces_url, hostname,
             str(visibility_timeout_s)], env=env
        )

    def stop(self, timeout_s: float = 30) -> None:
        super().stop(timeout_s)


def _serve(url: str, prefix: str, traces_url: str, hostname: str, timeout_s: str) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "billing-worker"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url), schedule_delay_millis=200)
    )
    CeleryInstrumentor().instrument(tracer_provider=provider)
    app = make_app(url, prefix, float(timeout_s))
    try:
        app.worker_main(["worker", "--pool=solo", "--loglevel=WARNING", "-n", hostname,
                         "--without-mingle", "--without-gossip", "--without-heartbeat"])
    finally:
        provider.shutdown()


if __name__ == "__main__":
    _serve(*sys.argv[1:6])
