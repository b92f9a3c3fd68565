"""RabbitMQ's Firehose tracer -> contract events, with no change to the apps or workers.

With tracing on in a vhost (`rabbitmqctl trace_on -p VHOST`), RabbitMQ copies every
message published in it to the topic exchange `amq.rabbitmq.trace` as `publish.<exchange>`
and every delivery to a consumer as `deliver.<queue>`: the original body, and headers
`exchange_name`, `routing_keys`, `properties` (the original's, its headers included),
`connection` (`127.0.0.1:52948 -> 127.0.0.1:5672`), `channel`, `user`, `vhost`, and on a
delivery `redelivered` (1 when the broker hands out a message it handed out before and got
no ack for). A trace message carries no time: its event's `ts` is when it was heard.

Two kinds of messages are understood, from their body and headers:

- **Dramatiq** (a JSON body with `message_id`, `actor_name`, `options`): the message id is
  the job_id (the same across retries), the actor the job_type, `options.retries` the
  retries before this copy. The delay queue (`q.DQ`) and dead-letter queue (`q.XQ`) are
  Dramatiq's own plumbing: a delivery from them runs nothing.
- **Celery** on RabbitMQ (protocol 2: headers `id`, `task`, `retries`; body
  `[args, kwargs, embed]`): the task id is the job_id, the task name the job_type.

What each becomes:

- `publish.*` of a message with no retries, whose id was not published before: `enqueue`;
- `publish.*` of a message with `retries` = n > 0, the first seen with that n: `nack` of
  attempt n, `reason` `retry` (a worker failed it and sent it again);
- `deliver.<queue>` (not a delay or dead-letter queue): `deliver`, `delivery_attempt` =
  retries + 1, `worker_id` = the consumer's connection.

A retry's `nack` is given the worker (and execution) of the attempt's delivery, where the
firehose saw it. A delivery with `redelivered` = 1 is the broker handing out again a message
whose consumer never acknowledged it (its connection or channel closed, or it was rejected
with requeue): `rabbitmq.redelivered` keeps the flag. The firehose sees no acks, so every
delivery's execution ends with its delivery, and a message delivered again reads as one
delivered after an attempt that went silent (`worker_crash`).

The actor's or task's arguments are kept as `dramatiq.args.N` / `dramatiq.kwargs.NAME` and
`celery.args.N` / `celery.kwargs.NAME` (text), so a mapping file can name the key:
`idempotency_key = "dramatiq.kwargs.order_id"`. A message of neither kind is ignored; a
trace message without a routing key of the tracer's is rejected.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from collectors.normalise import Normaliser, RecordError, Row, content_uid

SOURCE = "rabbitmq-firehose"
TRACE_EXCHANGE = "amq.rabbitmq.trace"
#: Message ids and retries remembered to tell a first publish from a move between queues.
REMEMBERED = 200_000
#: The longest argument text kept per argument.
MAX_ARGUMENT = 1_024
#: Dramatiq's own queues beside a queue `q`: delayed messages and dead letters.
_PLUMBING = (".DQ", ".XQ")


@dataclass(frozen=True)
class Message:
    """What a traced message's body and headers say of the job."""

    job_id: str
    job_type: str
    retries: int
    queue: str | None
    attrs: dict[str, Any] = field(default_factory=dict)


def argument_attrs(prefix: str, args: Any, kwargs: Any) -> dict[str, str]:
    """Positional and keyword arguments as `PREFIX.args.N` / `PREFIX.kwargs.NAME` text."""
    out: dict[str, str] = {}
    if isinstance(args, list | tuple):
        for index, value in enumerate(args):
            out[f"{prefix}.args.{index}"] = _text(value)
    if isinstance(kwargs, dict):
        for name, value in kwargs.items():
            out[f"{prefix}.kwargs.{name}"] = _text(value)
    return out


def _text(value: Any) -> str:
    """A string as it is, anything else as JSON: what a key is compared by."""
    if isinstance(value, str):
        return value[:MAX_ARGUMENT]
    return orjson.dumps(value, default=repr).decode()[:MAX_ARGUMENT]


def read_message(body: bytes, properties: Mapping[str, Any]) -> Message | None:
    """The job a traced message carries, or None for a message of neither kind."""
    headers = properties.get("headers") or {}
    if isinstance(headers, Mapping) and "task" in headers and "id" in headers:
        return _celery(body, headers)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(data, dict) and "message_id" in data and "actor_name" in data:
        options = data.get("options") or {}
        retries = options.get("retries", 0) if isinstance(options, dict) else 0
        return Message(
            str(data["message_id"]), str(data["actor_name"]), _count(retries),
            str(data["queue_name"]) if data.get("queue_name") else None,
            argument_attrs("dramatiq", data.get("args"), data.get("kwargs")),
        )
    return None


def _celery(body: bytes, headers: Mapping[str, Any]) -> Message:
    attrs: dict[str, Any] = {}
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, list) and len(data) >= 2:
        attrs = argument_attrs("celery", data[0], data[1])
    return Message(str(headers["id"]), str(headers["task"]), _count(headers.get("retries")),
                   None, attrs)


def _count(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def _text_of(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass
class _Delivery:
    uid: str
    worker: str


class FirehoseMapper:
    """Maps trace messages in the order heard; keeps what a later one needs (which ids were
    published, which retries were seen, which delivery each id had last)."""

    def __init__(self, normaliser: Normaliser | None = None) -> None:
        self.normaliser = normaliser or Normaliser()
        self._published: OrderedDict[str, None] = OrderedDict()
        self._retried: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._delivered: OrderedDict[str, _Delivery] = OrderedDict()

    def map(
        self, routing_key: str, headers: Mapping[str, Any], body: bytes,
        heard_us: int | None = None,
    ) -> Row | None:
        """The row of one trace message, or None when it is no lifecycle step. RecordError
        for a message that is not the tracer's."""
        kind, _, name = routing_key.partition(".")
        if kind not in ("publish", "deliver"):
            raise RecordError(f"routing key {routing_key!r} is not publish.* or deliver.*")
        properties = headers.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise RecordError("the trace's `properties` header is no table")
        message = read_message(bytes(body), properties)
        if message is None:
            return None
        ts = heard_us if heard_us is not None else time.time_ns() // 1_000
        connection = _text_of(headers.get("connection", ""))
        routed = [_text_of(key) for key in headers.get("routing_keys") or []]
        attrs: dict[str, Any] = {
            "rabbitmq.connection": connection,
            "rabbitmq.channel": headers.get("channel"),
            "rabbitmq.user": _text_of(headers.get("user", "")),
            "rabbitmq.vhost": _text_of(headers.get("vhost", "")),
            "rabbitmq.exchange": _text_of(headers.get("exchange_name", "")),
            "rabbitmq.routing_keys": routed,
            "retries": message.retries,
            **message.attrs,
        }
        if kind == "publish":
            target = routed[0] if routed else name
            flat = self._published_row(message, target, attrs)
        else:
            flat = self._delivered_row(message, name, connection, headers, attrs, routing_key)
        if flat is None:
            return None
        flat.update({"ts": ts, "job_id": message.job_id, "job_type": message.job_type})
        execution = flat.pop("_execution", None)
        event, worker = flat["event"], flat.get("worker_id")
        uid = content_uid(SOURCE, routing_key, orjson.dumps(dict(headers), default=str), body)
        row = self.normaliser.normalise(flat, uid=uid, source=SOURCE)  # consumes `flat`
        if event == "deliver":
            _remember(self._delivered, message.job_id, _Delivery(uid, str(worker)))
            row["execution_id"] = uid
        elif event == "nack":
            row["execution_id"] = execution
        return row

    def _published_row(
        self, message: Message, target: str, attrs: dict[str, Any]
    ) -> dict[str, Any] | None:
        queue = _base_queue(message.queue or target)
        if target.endswith(".XQ"):
            return None  # a dead letter, kept by Dramatiq
        if message.retries == 0:
            if message.job_id in self._published:
                return None  # the same message moved (from the delay queue): no new enqueue
            _remember(self._published, message.job_id, None)
            return {"event": "enqueue", "queue": queue, **attrs}
        retried = (message.job_id, message.retries)
        if retried in self._retried:
            return None  # the retry moved from the delay queue to its queue
        _remember(self._retried, retried, None)
        _remember(self._published, message.job_id, None)
        delivery = self._delivered.get(message.job_id)
        flat = {
            "event": "nack", "queue": queue, "delivery_attempt": message.retries,
            "reason": "retry", "worker_id": delivery.worker if delivery else
            attrs["rabbitmq.connection"], **attrs,
        }
        flat["_execution"] = delivery.uid if delivery else None
        return flat

    def _delivered_row(
        self, message: Message, queue: str, connection: str, headers: Mapping[str, Any],
        attrs: dict[str, Any], routing_key: str,
    ) -> dict[str, Any] | None:
        if queue.endswith(_PLUMBING):
            return None  # held in the delay queue or dead-lettered: nothing runs
        redelivered = headers.get("redelivered")
        return {
            "event": "deliver", "queue": queue, "delivery_attempt": message.retries + 1,
            "worker_id": connection or "unknown",
            "rabbitmq.redelivered": bool(redelivered) if redelivered is not None else None,
            **attrs,
        }


def _base_queue(queue: str) -> str:
    for suffix in _PLUMBING:
        if queue.endswith(suffix):
            return queue[: -len(suffix)]
    return queue


def _remember(memory: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    memory[key] = value
    memory.move_to_end(key)
    while len(memory) > REMEMBERED:
        memory.popitem(last=False)
