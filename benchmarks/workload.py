"""A seeded, vectorised workload for the benchmarks: contract events at any size.

Built column-wise with polars so that 10M events take seconds, not minutes. Each
idempotency key has one job and eight events (enqueue, deliver, lock_acquire, side_effect,
commit, lock_release, ack, and a redelivery for a fifth of the keys, a lock_renew for the
rest); timestamps mix whole
and fractional seconds; a handful of extra fields (message, host, level, ...) land in
`attrs`. The same frame feeds both the JSON-lines file and the Arrow batches written
straight into a store, so a key of one is a key of the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from store.schema import EVENTS_SCHEMA

STEPS = (
    "enqueue",
    "deliver",
    "lock_acquire",
    "side_effect",
    "commit",
    "lock_release",
    "ack",
    "deliver",
    "lock_renew",
)
EVENTS_PER_KEY = 8
EVENTS_PER_DAY = 10_000_000
T0_MICROS = 1_764_460_800_000_000  # 2025-11-30T00:00:00Z
_DOMAINS = ("billing", "mail", "report", "sync", "export", "search", "media", "auth", "ledger")
_VERBS = ("charge", "send", "render", "refresh", "index", "resize")
JOB_TYPES = tuple(f"{d}.{v}" for d in _DOMAINS for v in _VERBS)[:50]


def key_of(index: int) -> str:
    """The idempotency key of the `index`-th key of the workload."""
    return f"inv-{index:09d}"


def frame(start: int, count: int, seed: int = 7) -> pl.DataFrame:
    """Events `start` .. `start + count` of the workload, as canonical columns + extras."""
    rng = np.random.default_rng([seed, start])
    i = np.arange(start, start + count, dtype=np.int64)
    key = i // EVENTS_PER_KEY
    step = i % EVENTS_PER_KEY
    keys_per_day = EVENTS_PER_DAY // EVENTS_PER_KEY
    base = T0_MICROS + key * 86_400_000_000 // keys_per_day
    offset = np.array([0, 40_000, 45_000, 900_000, 950_000, 960_000, 980_000, 61_000_000])
    jitter = rng.integers(0, 30_000, count)
    ts = base + offset[step] + jitter
    whole = rng.random(count) < 0.35
    ts = np.where(whole, ts - ts % 1_000_000, ts)
    redelivered = (key * 2_654_435_761) % 100 < 20  # a fifth of the keys ran twice
    redelivered = (key * 2_654_435_761) % 100 < 20  # a fifth of the keys ran twice
    renew = (step == 7) & ~redelivered  # the others renewed their lock instead
    ts = np.where(renew, base + 500_000 + jitter, ts)
    step = np.where(renew, 8, step)
    attempt = np.where(step == 7, 2, 1)
    worker = np.where(step == 7, (key + 17) % 64, key % 64)
    df = pl.DataFrame(
        {
            "i": i,
            "key": key,
            "step": step,
            "ts": ts,
            "whole": whole,
            "attempt": attempt,
            "worker": worker,
        }
    )
    step_name = pl.col("step").replace_strict(dict(enumerate(STEPS)), return_dtype=pl.String)
    job_type = (pl.col("key") % len(JOB_TYPES)).replace_strict(
        dict(enumerate(JOB_TYPES)), return_dtype=pl.String
    )
    k = pl.col("key")
    lock_step = pl.col("step").is_in([2, 5, 8])
    worker_step = pl.col("step") >= 1
    return df.sort("ts").select(
        pl.col("i"),
        pl.col("ts"),
        pl.col("whole"),
        step_name.alias("event"),
        pl.format("job-{}", k.hash(seed=seed).cast(pl.String)).alias("job_id"),
        job_type.alias("job_type"),
        pl.format("inv-{}", k.cast(pl.String).str.zfill(9)).alias("idempotency_key"),
        pl.format("acct-{}", (k % 50_000).cast(pl.String)).alias("resource_key"),
        pl.format("q-{}", (k % 8).cast(pl.String)).alias("queue"),
        pl.when(worker_step).then(pl.col("attempt")).alias("delivery_attempt"),
        pl.when(worker_step)
        .then(pl.format("worker-{}:{}", pl.col("worker"), 1000 + pl.col("worker") * 7))
        .alias("worker_id"),
        pl.when(lock_step)
        .then(pl.format("lock:acct-{}", (k % 50_000).cast(pl.String)))
        .alias("lock_key"),
        pl.when(lock_step).then(pl.format("tok-{}", k * 31 % 1_000_003)).alias("lock_owner"),
        pl.when(pl.col("step").is_in([2, 8])).then(pl.lit(30_000)).alias("lock_ttl_ms"),
        pl.when(pl.col("step").is_in([1, 7])).then(pl.lit(60_000)).alias("visibility_timeout_ms"),
        pl.lit("2025.11.3").alias("service_version"),
        pl.format(
            "{} {} for account acct-{} (attempt {})",
            step_name,
            pl.format("inv-{}", k.cast(pl.String).str.zfill(9)),
            (k % 50_000).cast(pl.String),
            pl.col("attempt"),
        ).alias("msg"),
        pl.format("ip-10-0-{}-{}", pl.col("worker") % 8, pl.col("worker")).alias("host"),
        pl.lit("info").alias("level"),
        pl.lit("eu-west-1").alias("region"),
        pl.lit("jobs.worker").alias("logger"),
        (pl.col("worker") * 7 + 1000).alias("pid"),
    )


_STRINGS = (
    "event",
    "job_id",
    "job_type",
    "idempotency_key",
    "resource_key",
    "queue",
    "worker_id",
    "lock_key",
    "lock_owner",
    "service_version",
    "msg",
    "host",
    "level",
    "region",
    "logger",
)
_NUMBERS = ("delivery_attempt", "lock_ttl_ms", "visibility_timeout_ms", "pid")


def _ts_text() -> pl.Expr:
    stamp = pl.from_epoch(pl.col("ts"), time_unit="us")
    whole = stamp.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    fraction = stamp.dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
    return pl.when(pl.col("whole")).then(whole).otherwise(fraction)


def json_lines(events: pl.DataFrame) -> pl.Series:
    """One JSON object per event, absent fields left out (as a real logger does)."""
    pieces = [pl.format('"ts":"{}"', _ts_text())]
    pieces += [pl.format('"{}":"{}"', pl.lit(name), pl.col(name)) for name in _STRINGS]
    pieces += [pl.format('"{}":{}', pl.lit(name), pl.col(name)) for name in _NUMBERS]
    body = pl.concat_str(pieces, separator=",", ignore_nulls=True)
    return events.select(pl.concat_str(pl.lit("{"), body, pl.lit("}")).alias("line"))["line"]


def write_jsonl(path: str | Path, events: int, chunk: int = 1_000_000) -> int:
    """Write `events` events as JSON lines; returns the file size in bytes."""
    with open(path, "wb") as handle:
        for start in range(0, events, chunk):
            lines = json_lines(frame(start, min(chunk, events - start)))
            handle.write(("\n".join(lines.to_list()) + "\n").encode())
    return Path(path).stat().st_size


def arrow_batches(events: int, chunk: int = 2_000_000, start: int = 0) -> Iterator[pa.Table]:
    """The workload as canonical Arrow tables, for writing straight into a store (events
    `start` .. `start + events`: a later start gives later events of keys of their own)."""
    for first in range(start, start + events, chunk):
        yield _as_events(frame(first, min(chunk, start + events - first)))


def _as_events(part: pl.DataFrame) -> pa.Table:
    extras = pl.struct("msg", "host", "level", "region", "logger", "pid").struct.json_encode()
    table = part.select(
        pl.format("{}-{}", pl.lit("bench"), pl.col("i")).alias("event_uid"),
        pl.from_epoch(pl.col("ts"), time_unit="us").dt.replace_time_zone("UTC").alias("ts"),
        *[pl.col(name) for name in EVENTS_SCHEMA.names[2:] if name in part.columns],
        pl.lit("bench").alias("source"),
        extras.alias("attrs"),
    ).to_arrow()
    columns = [
        table[f.name].cast(f.type)
        if f.name in table.column_names
        else pa.nulls(len(table), f.type)
        for f in EVENTS_SCHEMA
    ]
    return pa.Table.from_arrays(columns, schema=EVENTS_SCHEMA)
