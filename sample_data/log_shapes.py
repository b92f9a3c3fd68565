"""JSON-lines files in the shapes real loggers write, for the ingest benchmark and tests.

Written by its own seeded generator, independent of the workload model, so that ingest
speed is measured on what other programs write too: the contract's
alias spellings, every timestamp form mixed in one file, empty and nested `attrs`, extra
fields, keys in any order, long and non-ASCII strings, CRLF line ends and gzip.

Every line is a valid contract event: a shape measures speed, not rejection.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO

import orjson

T0 = datetime(2025, 11, 30, tzinfo=UTC)
T0_SECONDS = int(T0.timestamp())
_STEPS = ("enqueue", "deliver", "lock_acquire", "side_effect", "commit", "lock_release", "ack")
_TYPES = ("billing.charge", "mail.send", "report.render", "search.index", "media.resize")
_QUEUES = ("default", "billing", "mail", "reports")
_LEVELS = ("debug", "info", "info", "info", "warning", "error")
_LOGGERS = ("app.tasks", "app.billing.worker", "celery.app.trace", "rq.worker")
_WORDS = (
    "charged", "card", "invoice", "sent", "retrying", "timeout", "lock", "renewed",
    "Zürich", "naïve", "café", "東京", "日本語のログ", "Ελληνικά", "emoji 🚀", "✓ done",
    'quote "q"', "back\\slash", "tab\tstop", "line\nbreak", "colon: here",
)
_ATTEMPT_NAMES = (
    "delivery_attempt",
    "job.delivery_attempt",
    "messaging.gcp_pubsub.message.delivery_attempt",
)
_FRAMES = tuple(f'  File "app/tasks.py", line {n}, in ünïcode_{n}' for n in range(8))
_OFFSETS = (timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30)))


@functools.lru_cache(maxsize=64)
def _second(seconds: int, offset: timezone) -> str:
    """The date and time of day of a second after T0, as seen at `offset` (a log writes
    hundreds of events a second, so each second is formatted once)."""
    return (T0 + timedelta(seconds=seconds)).astimezone(offset).strftime("%Y-%m-%dT%H:%M:%S")


def _zone(offset: timezone) -> str:
    if offset is UTC:
        return "Z"
    zone = datetime(2025, 1, 1, tzinfo=offset).strftime("%z")
    return f"{zone[:3]}:{zone[3:]}"


class _Event:
    """One contract event's values, before a shape spells them."""

    __slots__ = ("attempt", "event", "i", "job_id", "job_type", "key", "micros", "queue", "worker")

    def __init__(self, rng: random.Random, i: int) -> None:
        self.i = i
        self.micros = i * 1_700 + rng.randrange(1_000)  # ~600 events a second, in order
        self.event = _STEPS[i % len(_STEPS)]
        self.key = f"order-{i // len(_STEPS)}"
        self.job_id = f"{rng.getrandbits(64):016x}-{i // len(_STEPS)}"
        self.job_type = _TYPES[(i // len(_STEPS)) % len(_TYPES)]
        self.queue = _QUEUES[(i // len(_STEPS)) % len(_QUEUES)]
        self.worker = f"worker-{rng.randrange(16)}:{4000 + rng.randrange(64)}"
        self.attempt = 1 + (rng.random() < 0.1)

    def rfc3339(self, offset: timezone = UTC, digits: int = 6) -> str:
        seconds, micros = divmod(self.micros, 1_000_000)
        text = _second(seconds, offset)
        if digits:
            text += "." + f"{micros:06d}{self.i % 1000:03d}"[:digits]
        return text + _zone(offset)

    def canonical(self) -> dict:
        """The contract's own names, in the order the sample model writes them."""
        record: dict = {
            "ts": self.rfc3339(),
            "event": self.event,
            "job_id": self.job_id,
            "job_type": self.job_type,
            "idempotency_key": self.key,
            "queue": self.queue,
            "worker_id": self.worker,
        }
        if self.event == "deliver":
            record["delivery_attempt"] = self.attempt
            record["visibility_timeout_ms"] = 30_000
        if self.event == "lock_acquire":
            record |= {"lock_key": self.key, "lock_owner": self.job_id, "lock_ttl_ms": 10_000}
        return record


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _canonical(rng: random.Random, e: _Event) -> dict:
    return e.canonical()


def _empty_attrs(rng: random.Random, e: _Event) -> dict:
    return e.canonical() | {"attrs": {}}


def _nested_attrs(rng: random.Random, e: _Event) -> dict:
    attrs: dict = {"tenant": f"t-{e.i % 97}", "http": {"method": "POST", "status": 200}}
    if rng.random() < 0.5:
        attrs["http"]["took_ms"] = round(rng.random() * 100, 3)
    if rng.random() < 0.3:
        attrs["user"] = {"id": rng.randrange(10**6), "plan": rng.choice(("free", "pro"))}
    if rng.random() < 0.1:
        attrs["flags"] = {}
    if rng.random() < 0.2:
        attrs["retry"] = rng.random() < 0.5
    return e.canonical() | {"attrs": attrs}


def _timestamp_on_5pct(rng: random.Random, e: _Event) -> dict:
    record = e.canonical()
    if rng.random() < 0.05:
        return {"timestamp": record.pop("ts"), **record}
    return record


def _aliases(rng: random.Random, e: _Event) -> dict:
    """Every spelling the contract accepts without a mapping file, mixed line by line."""
    record: dict = {rng.choice(("ts", "timestamp", "time", "@timestamp")): e.rfc3339()}
    record[rng.choice(("event", "job.event"))] = e.event
    spelling = rng.random()
    if spelling < 0.25:
        record["messaging.message.id"] = e.job_id
    elif spelling < 0.5:
        record["job"] = {"job_id": e.job_id, "idempotency_key": e.key}
    else:
        record["job_id"] = e.job_id
    if "job" not in record:
        record[rng.choice(("idempotency_key", "job.idempotency_key"))] = e.key
    record[rng.choice(("job_type", "celery.task_name"))] = e.job_type
    record[rng.choice(("queue", "messaging.destination.name", "messaging.destination"))] = e.queue
    record[rng.choice(("worker_id", "service.instance.id"))] = e.worker
    record[rng.choice(("msg", "message"))] = _sentence(rng, 3)
    if e.event == "deliver":
        name = rng.choice(_ATTEMPT_NAMES)
        record[name] = e.attempt
    if e.event == "lock_acquire":
        record |= {"lock_key": e.key, "lock_owner": e.job_id, "lock_ttl_ms": 10_000}
    return record


def _mixed_timestamps(rng: random.Random, e: _Event) -> dict:
    """Epoch s (whole and fractional), ms, µs, ns and RFC 3339 with offsets, in one file."""
    record = e.canonical()
    seconds, micros = divmod(e.micros, 1_000_000)
    seconds += T0_SECONDS
    form = e.i % 8
    if form == 0:
        record["ts"] = seconds
    elif form == 1:
        record["ts"] = seconds + micros / 1e6
    elif form == 2:
        record["ts"] = seconds * 1_000 + micros // 1_000
    elif form == 3:
        record["ts"] = seconds * 1_000_000 + micros
    elif form == 4:
        record["ts"] = (seconds * 1_000_000 + micros) * 1_000 + e.i % 1_000
    elif form == 5:
        record["ts"] = e.rfc3339(_OFFSETS[e.i % 2], digits=3)
    elif form == 6:
        record["ts"] = e.rfc3339(digits=9)
    else:
        record["ts"] = e.rfc3339(digits=0)
    return record


def _extra_fields(rng: random.Random, e: _Event) -> dict:
    return e.canonical() | {
        "level": rng.choice(_LEVELS),
        "msg": f"{e.event} {e.job_type} for {e.key}",
        "logger": rng.choice(_LOGGERS),
        "order_id": f"ord-{e.i // len(_STEPS)}",
        "host": f"ip-10-0-{e.i % 7}-{e.i % 13}",
        "pid": 4000 + e.i % 64,
        "duration_ms": round(rng.random() * 250, 3),
    }


def _field_order(rng: random.Random, e: _Event) -> dict:
    items = list(_extra_fields(rng, e).items())
    rng.shuffle(items)
    return dict(items)


def _long_unicode(rng: random.Random, e: _Event) -> dict | bytes:
    """Long messages and tracebacks; every other line as Python's `json.dumps` writes it
    (non-ASCII as `\\u` escapes, a space after `:` and `,`), the rest as raw UTF-8."""
    record = e.canonical() | {
        "msg": _sentence(rng, rng.randrange(10, 60)),
        "user": rng.choice(("Åsa Ölund", "José Núñez", "山田太郎", "Zoë 🙂")),
    }
    if e.i % 5 == 0:
        record["stack"] = "\n".join(_FRAMES)
    return json.dumps(record).encode() if e.i % 2 else record


_SHAPES: dict[str, Callable[[random.Random, _Event], dict | bytes]] = {
    "canonical": _canonical,
    "empty_attrs": _empty_attrs,
    "nested_attrs": _nested_attrs,
    "timestamp_5pct": _timestamp_on_5pct,
    "aliases": _aliases,
    "mixed_timestamps": _mixed_timestamps,
    "extra_fields": _extra_fields,
    "field_order": _field_order,
    "long_unicode": _long_unicode,
}


def _mixed(rng: random.Random, e: _Event) -> dict | bytes:
    """All of the shapes above, line by line."""
    shapes = list(_SHAPES.values())
    return shapes[e.i % len(shapes)](rng, e)


# name -> (record builder, line end, gzip)
SHAPES: dict[str, tuple[Callable[[random.Random, _Event], dict | bytes], bytes, bool]] = {
    **{name: (build, b"\n", False) for name, build in _SHAPES.items()},
    "crlf": (_extra_fields, b"\r\n", False),
    "gzip": (_mixed, b"\n", True),
}


def lines(shape: str, count: int, seed: int = 7) -> Iterator[bytes]:
    """`count` lines of a shape (without line ends), the same for the same seed."""
    build = SHAPES[shape][0]
    rng = random.Random(f"{shape}-{seed}")
    for i in range(count):
        record = build(rng, _Event(rng, i))
        yield record if isinstance(record, bytes) else orjson.dumps(record)


def write(shape: str, count: int, path: Path, seed: int = 7) -> Path:
    """A file of `count` lines of a shape, with the shape's line ends and compression."""
    _, end, compressed = SHAPES[shape]
    out: BinaryIO
    with (gzip.open(path, "wb", compresslevel=6) if compressed else open(path, "wb")) as out:
        batch: list[bytes] = []
        for line in lines(shape, count, seed):
            batch.append(line)
            if len(batch) == 10_000:
                out.write(end.join(batch) + end)
                batch = []
        if batch:
            out.write(end.join(batch) + end)
    return path


def file_name(shape: str) -> str:
    return f"{shape}.jsonl.gz" if SHAPES[shape][2] else f"{shape}.jsonl"
