"""What the spans of opentelemetry-instrumentation-celery (`CeleryInstrumentor`) say.

It writes, per task:

- in the producer, `apply_async/<task>` (kind PRODUCER, `celery.action=apply_async`,
  `messaging.message.id` = the task id): the `enqueue`;
- in the worker, `run/<task>` (kind CONSUMER, `celery.action=run`, written when the run
  ends) with `celery.retries` (left out while it is 0) and `celery.delivery_info`, the
  repr of a dict holding the transport's `redelivered` flag: one execution, whose start
  is the `deliver`.

Its `celery.hostname` does not name the worker: the instrumentation writes the message's
`origin` (the sender, `gen<pid>@<host>` for a producer) over the worker's `hostname`, both
under that one key. The worker is the process that exported the run span: its resource
(host:pid, else service.instance.id), as for any span.

The run's end is its settle, from `celery.state` (SUCCESS, IGNORED: `ack`; RETRY,
REJECTED: `nack`; FAILURE: `fail`), unless the span names its events itself (dupescope's
own Celery instrumentation writes them onto the same span). Without it every run would
look like one that went silent, and every retry like a lost worker.

The run's delivery attempt is `retries + 1`, and `retries + 2` where the transport flags
the delivery as redelivered (AMQP does; kombu's Redis transport does when it restores an
unacked message): "delivered at least once before", as dupescope's own Celery
instrumentation counts it. Values may arrive as strings, whatever the SDK wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from collectors.mapping import CELERY_ATTEMPT, CELERY_RETRIES

ACTION = "celery.action"
DELIVERY_INFO = "celery.delivery_info"
#: Keys only Celery-instrumented spans carry: the native decoder leaves such spans here.
KEYS = (ACTION, DELIVERY_INFO)
PUBLISH_PREFIX = "apply_async/"

# 'redelivered': True in a dict's repr (or "redelivered": true in JSON).
_REDELIVERED = re.compile(r"""['"]redelivered['"]\s*:\s*(?:True|true)\b""")


def is_publish(name: str, attrs: dict[str, Any]) -> bool:
    """Celery's publish span: an `enqueue`, never an execution."""
    return attrs.get(ACTION) == "apply_async" or name.startswith(PUBLISH_PREFIX)


def is_run(attrs: dict[str, Any]) -> bool:
    """Celery's `run/<task>` span: one execution of the task."""
    return attrs.get(ACTION) == "run"


# celery.states -> how the run settled its message. A REJECTED run may have been requeued
# or dropped; either way it ended in its own verdict, which is what the causes ask.
_SETTLES = {"SUCCESS": "ack", "IGNORED": "ack", "RETRY": "nack", "REJECTED": "nack",
            "FAILURE": "fail"}


def settle(
    attrs: dict[str, Any], failure: Callable[[], str]
) -> tuple[str, dict[str, Any]] | None:
    """The settle event a run span's end records, with its attributes; None if unknown.

    `failure()` is what the span says went wrong (its exception or status message).
    """
    if not is_run(attrs):
        return None
    event = _SETTLES.get(str(attrs.get("celery.state")))
    if event is None or event == "ack":
        return (event, {}) if event else None
    reason = attrs.get("celery.retry.reason") if event == "nack" else None
    return event, {"reason": str(reason or failure() or attrs.get("celery.state"))}


def _redelivered(info: Any) -> bool:
    if isinstance(info, dict):
        return info.get("redelivered") in (True, "True", "true")
    return isinstance(info, str) and _REDELIVERED.search(info) is not None


def _count(value: Any) -> int | None:
    """An integer however it arrived (7, "7", 7.0); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def derived(attrs: dict[str, Any]) -> dict[str, Any]:
    """The delivery attempt a Celery span implies, under the internal key that `mapping`
    ranks below the attempts a span spells itself.

    A `celery.retries` that is no integer derives no attempt: the normaliser then refuses
    the record, naming the value.
    """
    out: dict[str, Any] = {}
    if is_run(attrs) or DELIVERY_INFO in attrs:
        retries = attrs.get(CELERY_RETRIES)
        count = 0 if retries is None else _count(retries)
        if count is not None:
            out[CELERY_ATTEMPT] = count + 1 + _redelivered(attrs.get(DELIVERY_INFO))
    return out
