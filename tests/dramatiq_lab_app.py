"""The Dramatiq actors of the Dramatiq labs (`dramatiq dramatiq_lab_app`), configured from
the environment: the broker (redis:// or amqp://), the queue, and the side-effect ledger
(tests/support/ledger.py) that gives the labs their ground truth.

`charge(key, fault)` writes its effect to the ledger, then misbehaves on its key's first
run only: `crash` kills its own worker process with SIGKILL (the message goes back to the
queue: at once on RabbitMQ, after the heartbeat timeout on Redis), `fail` raises (Dramatiq
retries it).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import dramatiq
from dramatiq.middleware import CurrentMessage

sys.path.insert(0, str(Path(__file__).parent))
from support import ledger  # noqa: E402

URL = os.environ["DUPESCOPE_DRAMATIQ_BROKER"]
QUEUE = os.environ["DUPESCOPE_DRAMATIQ_QUEUE"]
LEDGER = os.environ["DUPESCOPE_DRAMATIQ_LEDGER"]
#: How long (ms) a Redis worker may be silent before another re-pushes its messages.
HEARTBEAT_MS = 1_500

if URL.startswith("redis"):
    from dramatiq.brokers.redis import RedisBroker

    # Maintenance (the re-push of dead workers' messages) on every command, not 1 in 1000.
    broker: dramatiq.Broker = RedisBroker(
        url=URL, heartbeat_timeout=HEARTBEAT_MS, maintenance_chance=1_000_000
    )
else:
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    broker = RabbitmqBroker(url=URL)
broker.add_middleware(CurrentMessage())
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE, max_retries=3, min_backoff=100, max_backoff=300)
def charge(key: str, fault: str = "") -> None:
    message = CurrentMessage.get_current_message()
    job_id = message.message_id if message else ""
    first = ledger.effects_by_key(ledger.read(LEDGER)).get(key, 0) == 0
    run = ledger.new_run()
    ledger.write(LEDGER, "effect", key, job_id, run, f"pid:{os.getpid()}")
    if first and fault == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if first and fault == "fail":
        raise ValueError(f"{key}: the first run fails after its effect")
    ledger.write(LEDGER, "done", key, job_id, run, f"pid:{os.getpid()}")
