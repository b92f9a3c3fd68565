"""The Celery 5 app the scenario's workers and producer run, configured from WORLD_* env.

    WORLD_BROKER_URL       redis://127.0.0.1:6379/N or amqp://guest:guest@127.0.0.1:5672//
    WORLD_BACKEND_URL      the result backend (Redis: dupescope counts deliveries there)
    WORLD_QUEUE            a queue (and exchange) name unique to the run
    WORLD_EVENT_EXCHANGE   the run's own event exchange (no other app's events on it)
    WORLD_LEDGER           the truth ledger file (see ledger.py)
    WORLD_VISIBILITY_S     the Redis transport's visibility timeout
    WORLD_DUPESCOPE_URL    optional: dupescope's own instrumentation exports OTLP/HTTP here
    WORLD_OTEL_URL         optional: CeleryInstrumentor exports OTLP/HTTP here
    WORLD_EFFECTS_LOG      optional: the app logs a JSON line per side effect here, keyed
                           by the task id (what a zero-code source lacks to tell harm)
    WORLD_REJECT_ON_WORKER_LOST  "1": task_reject_on_worker_lost (a task whose pool
                           process died is requeued, and runs again)

The two instrumentations export to two collectors through two tracer providers, so each
source is scored alone from the same run. Everything is set up at import, in the worker's
main process before the pool forks (the SDK's batch processor restarts its thread in each
child); a SIGKILLed process never exports its last batch, as in production.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from datetime import UTC, datetime

import orjson
from celery import Celery, signals

from celery_world import ledger

BROKER_URL = os.environ["WORLD_BROKER_URL"]
QUEUE = os.environ["WORLD_QUEUE"]
LEDGER = os.environ["WORLD_LEDGER"]
VISIBILITY_S = float(os.environ.get("WORLD_VISIBILITY_S", "3"))
#: How long a first run waits for its own redelivery before giving up (outlive) or for
#: its SIGKILL (crash): far longer than the harness needs, far shorter than a test.
HANG_S = 40.0

app = Celery("celery_world", broker=BROKER_URL, backend=os.environ.get("WORLD_BACKEND_URL"))
app.conf.update(
    task_acks_late=True,
    task_default_queue=QUEUE,
    task_default_exchange=QUEUE,
    task_default_routing_key=QUEUE,
    # One message per pool process: a message waiting in a busy worker's prefetch buffer
    # would outlive the short visibility timeout and run twice, unplanned.
    worker_prefetch_multiplier=1,
    worker_send_task_events=True,
    task_send_sent_event=True,
    event_exchange=os.environ.get("WORLD_EVENT_EXCHANGE", "celeryev"),
    # No pidbox: nothing of this run lingers in the broker's shared bindings.
    worker_enable_remote_control=False,
    result_expires=600,
    broker_connection_retry_on_startup=True,
    task_reject_on_worker_lost=os.environ.get("WORLD_REJECT_ON_WORKER_LOST") == "1",
)
EFFECTS_LOG = os.environ.get("WORLD_EFFECTS_LOG")
if BROKER_URL.startswith("redis"):
    app.conf.broker_transport_options = {
        "visibility_timeout": VISIBILITY_S,
        # Sweep for expired unacked messages every second, not every 100 s.
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
        # The unacked bookkeeping is per database: keep ours apart from other apps', so
        # our short timeout never restores their messages (nor theirs ours).
        "unacked_key": f"{QUEUE}.unacked",
        "unacked_index_key": f"{QUEUE}.unacked_index",
        "unacked_mutex_key": f"{QUEUE}.unacked_mutex",
    }


def _provider(endpoint: str, service: str):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    return provider


PROVIDERS = []
if os.environ.get("WORLD_DUPESCOPE_URL"):
    from dupescope import instrument
    from dupescope.instrument.celery import instrument_celery

    _own = _provider(os.environ["WORLD_DUPESCOPE_URL"], "world-dupescope")
    PROVIDERS.append(_own)
    # Connected before CeleryInstrumentor, so that dupescope opens its own spans instead
    # of writing onto the other source's (it only looks for them; see instrument_celery).
    instrument_celery(app, sinks=instrument.Sinks(tracer_provider=_own), otel=False)
    # ...which it warns about, rightly in production, by design here.
    logging.getLogger("dupescope.instrument.celery").setLevel(logging.ERROR)
if os.environ.get("WORLD_OTEL_URL"):
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    _otel = _provider(os.environ["WORLD_OTEL_URL"], "world-otel")
    PROVIDERS.append(_otel)
    CeleryInstrumentor().instrument(tracer_provider=_otel)


def flush(**_: object) -> None:
    """Export what is batched: pool processes leave through os._exit, skipping atexit."""
    for provider in PROVIDERS:
        provider.force_flush(5_000)


signals.worker_process_shutdown.connect(flush, weak=False)
signals.worker_shutdown.connect(flush, weak=False)


def _runs_of(key: str, task_id: str | None = None) -> list[ledger.Entry]:
    return [
        e for e in ledger.read(LEDGER)
        if e.kind == "effect" and e.key == key and (task_id is None or e.task_id == task_id)
    ]


def log_side_effect(path: str, task_id: str, task_name: str) -> None:
    """The line an app adds to its own log where the effect runs: the contract's
    `side_effect`, keyed by the task id alone (no worker id, no attempt)."""
    line = orjson.dumps({
        "ts": datetime.now(UTC).isoformat(), "event": "side_effect", "job_id": task_id,
        "job_type": task_name,
    }) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@app.task(bind=True, name="world.effect")
def effect(self, idempotency_key: str, behaviour: str = "normal") -> str:
    """Run the business effect once; `behaviour` says what fault this run walks into.

    normal: returns at once. slow: takes a second (its producer times out and resends).
    crash: the first run hangs after its effect until the harness SIGKILLs its worker.
    outlive: the first run outlives the visibility timeout: it waits until the broker
    has redelivered it and the other run did its effect, then returns.
    """
    request = self.request
    run = uuid.uuid4().hex
    first = not _runs_of(idempotency_key, request.id)
    ledger.append(LEDGER, ledger.effect_entry(
        "effect", idempotency_key, request.id, run, request.hostname or ""))
    if os.environ.get("WORLD_DUPESCOPE_URL"):
        instrument.current_run().side_effect(behaviour=behaviour)
    if EFFECTS_LOG:
        log_side_effect(EFFECTS_LOG, request.id, self.name)
    if behaviour == "slow":
        time.sleep(1.0)
    elif first and behaviour == "crash":
        time.sleep(HANG_S)
    elif first and behaviour == "outlive":
        deadline = time.monotonic() + HANG_S
        while len(_runs_of(idempotency_key, request.id)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # still running after the redelivered run began
    ledger.append(LEDGER, ledger.effect_entry(
        "done", idempotency_key, request.id, run, request.hostname or ""))
    return behaviour
