"""A seeded corpus of JSON lines in every spelling the built-in mapping and a user's
mapping read, with bad and odd lines mixed in: what the block and line ingest paths, and
the decoder corpus, are compared on."""

from __future__ import annotations

import random

import orjson

# One spelling per field, as one logger writes it; the odd lines below mix them.
TEXT_STAMPS = [
    "2025-11-30T12:00:00Z",
    "2025-11-30T12:00:00.5Z",
    "2025-11-30T12:00:00.123456Z",
    "2025-11-30T12:00:00.123456789Z",
    "2025-11-30T14:00:00+02:00",
    "2025-11-30T06:30:00.25-05:30",
    "2025-11-30 12:00:01",
    "2024-02-29T23:59:59.999Z",
    "1764504000123",
]
EPOCHS = [
    1_764_504_000,
    1_764_504_000_123,
    1_764_504_000_123_456,
    1_764_504_000_123_456_789,
]
EXTRAS = [
    {"msg": "charged", "host": "ip-10-0-0-1"},
    {"msg": 'quote " and backslash \\ and tab\t and é', "pid": 4242},
    {"http": {"status": 200, "path": "/pay", "took_ms": 12.5}},
    {"ok": True, "ratio": 0.125},
    {"ratio": 2.0},
    {"level": "info", "execution_id": "not a column for logs"},
    {},
]
BAD_LINES = [
    b"{not json",
    b"[1, 2]",
    b'"just a string"',
    b'{"ts": "yesterday", "event": "ack", "job_id": "j"}',
    b'{"ts": "2025-11-30T23:59:60Z", "event": "ack", "job_id": "j"}',
    b'{"ts": "2025-02-30T00:00:00Z", "event": "ack", "job_id": "j"}',
    b'{"event": "ack", "job_id": "j"}',
    b'{"ts": 1764504000, "event": "nope", "job_id": "j"}',
    b'{"ts": 1764504000, "event": "ack"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": ""}',
    b'{"ts": 1764504000, "event": "deliver", "job_id": "j", "delivery_attempt": 0}',
    b'{"ts": 1764504000, "event": "lock_acquire", "job_id": "j", "lock_ttl_ms": 1.5}',
    b'{"ts": 1764504000, "event": "ack", "job_id": {"nested": 1}}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "x": NaN}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "x": "\\ud800"}',
    b'{"ts": true, "event": "ack", "job_id": "j"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "bell\x07"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "cr\rinside"}',
]
ODD_LINES = [
    b"",
    b"   ",
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "x": null}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "tags": ["a", "b"]}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "meta": {}}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "job_id": "k"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": 12345}',
    b'{"ts": 1764504000, "event": "deliver", "job_id": "j", "delivery_attempt": "3"}',
    b'{"ts": 1764504000, "event": "deliver", "job_id": "j", "delivery_attempt": 2.0}',
    b'  {"ts": 1764504000, "event": "ack", "job_id": "padded"}  ',
    b'{"ts": 1764504000, "event": "ack", "job_id": "crlf"}\r',
    b'{"ts": 1764504000.5, "event": "ack", "job_id": "float seconds"}',
    b'{"time": 1764504000, "event": "ack", "job_id": "int among floats"}',
    b'{"timestamp": "2025-11-30T12:00:00Z", "event": "ack", "job_id": "text among ints"}',
    b'{"ts":\t1764504000, "event": "ack", "job_id": "tab"}',
    b'{"ts": 1764504000,\r"event": "ack", "job_id": "cr between fields"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "x": "\\ud83d\\ude00"}',
    b'{"ts": 1764504000, "event": "ack", "job_id": "j", "job.x": 1, "job": {"x": 2}}',
]


def _record(rng: random.Random, i: int) -> dict:
    kind = rng.choice(["plain", "alias", "nested", "otel", "celery", "mapped"])
    ts = rng.choice(TEXT_STAMPS)
    key = f"inv-{i % 40}"
    job = f"job-{i % 90}"
    event = rng.choice(["enqueue", "deliver", "lock_acquire", "side_effect", "ack"])
    if kind == "plain":
        record = {"ts": ts, "event": event, "job_id": job, "idempotency_key": key}
        if event == "deliver":
            record |= {"delivery_attempt": rng.randint(1, 3), "visibility_timeout_ms": 30000}
        if event == "lock_acquire":
            record |= {"lock_key": "acct-1", "lock_owner": "tok", "lock_ttl_ms": 10_000}
    elif kind == "alias":
        stamp = rng.choice(["timestamp", "@timestamp"])
        record = {stamp: rng.choice(EPOCHS), "job.event": event, "messaging.message.id": job}
        record |= {"messaging.destination.name": "q1", "service.instance.id": "w:1"}
    elif kind == "nested":
        record = {"ts": ts, "job": {"event": event, "job_id": job, "idempotency_key": key}}
    elif kind == "otel":
        operation = rng.choice(["publish", "process", "settle"])
        seconds = 1_764_504_000 + rng.randrange(10**6) / 1e6
        record = {"time": seconds, "messaging.operation.type": operation, "job.job_id": job}
        record["messaging.gcp_pubsub.message.delivery_attempt"] = rng.randint(1, 4)
    elif kind == "celery":
        record = {"ts": ts, "event": event, "job_id": job, "celery.task_name": "mail.send"}
        record["celery.retries"] = rng.randint(0, 3)
    else:
        record = {"when": ts, "event": rng.choice(["task-received", "task-succeeded", event])}
        record |= {"task": {"uuid": job}, "payment": {"key": key}}
        if rng.random() < 0.5:
            record["order_id"] = f"ord-{i}"
    return record | rng.choice(EXTRAS)


def corpus(lines: int = 3000, seed: int = 11) -> list[bytes]:
    """`lines` records drawn with `seed`, the bad and odd lines inserted among them."""
    rng = random.Random(seed)
    out = [orjson.dumps(_record(rng, i)) for i in range(lines)]
    for odd in BAD_LINES + ODD_LINES:
        out.insert(rng.randrange(len(out)), odd)
    return out
