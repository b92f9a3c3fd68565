"""Benchmark-scale output: copies of one modelled block, renamed and shifted in time.

The model runs once (a base block of a few hours); every copy then gets its ids
suffixed with `.<copy:07d>` (job_id, idempotency_key, resource_key, lock_key,
lock_owner) and its timestamps moved by a whole number of hours. Both edits keep every
byte length, so a copy is two `bytes.replace` passes over a template instead of
per-event encoding, and a partial copy is a byte slice at a known line end.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from sample_data.clock import EPOCH, EPOCH_US, HOUR
from sample_data.workload import CANONICAL, Workload, generate

BASE_EVENTS = 20_000
MARK = b"@@@@@@@"  # 7 bytes, replaced by the 7-digit copy number
RENAMED = ("job_id", "idempotency_key", "resource_key", "lock_key", "lock_owner", "held_by")
_STRING_COLUMNS = ("event", "job_id", "job_type", "idempotency_key", "resource_key", "queue",
                   "worker_id", "lock_key", "lock_owner", "service_version")

SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")),
    ("event", pa.string()), ("job_id", pa.string()), ("job_type", pa.string()),
    ("idempotency_key", pa.string()), ("resource_key", pa.string()), ("queue", pa.string()),
    ("delivery_attempt", pa.int32()), ("worker_id", pa.string()), ("lock_key", pa.string()),
    ("lock_owner", pa.string()), ("lock_ttl_ms", pa.int64()),
    ("visibility_timeout_ms", pa.int64()), ("service_version", pa.string()),
    ("attrs", pa.string()),  # JSON object of the non-canonical fields
])


@functools.lru_cache(maxsize=4)
def base_block(seed: int) -> Workload:
    return generate(seed, BASE_EVENTS)


class _Template:
    """The base block as hour-aligned byte chunks with id placeholders."""

    def __init__(self, seed: int) -> None:
        w = base_block(seed)
        self.n = len(w.events)
        first_hour = w.events[0]["ts"][:13]
        self.base_hour = int((_parse_hour(first_hour) - EPOCH).total_seconds()) // 3600
        chunks: dict[str, list[bytes]] = {}
        self.line_ends: list[int] = []
        offset = 0
        for e in w.events:
            e = {k: (v + "." + MARK.decode() if k in RENAMED else v) for k, v in e.items()}
            line = orjson.dumps(e) + b"\n"
            chunks.setdefault(e["ts"][:13], []).append(line)
            offset += len(line)
            self.line_ends.append(offset)
        self.hours = [int((_parse_hour(h) - EPOCH).total_seconds()) // 3600 - self.base_hour
                      for h in chunks]
        self.span_hours = self.hours[-1] + 1
        self.chunks = [(b'"ts":"' + h.encode(), b"".join(ls)) for h, ls in chunks.items()]

    def copy(self, c: int) -> bytes:
        digits = b"%07d" % c
        parts = []
        for (old, chunk), h in zip(self.chunks, self.hours, strict=True):
            hour = EPOCH + timedelta(hours=self.base_hour + h + c * self.span_hours)
            new = b'"ts":"' + hour.strftime("%Y-%m-%dT%H").encode()
            parts.append(chunk.replace(old, new))
        return b"".join(parts).replace(MARK, digits)


def _parse_hour(prefix: str) -> Any:
    from datetime import UTC, datetime

    return datetime.strptime(prefix, "%Y-%m-%dT%H").replace(tzinfo=UTC)


@functools.lru_cache(maxsize=4)
def _template(seed: int) -> _Template:
    return _Template(seed)


def write_jsonl(path: str | Path, n_events: int, seed: int = 7) -> Path:
    """Write exactly `n_events` contract events as JSON lines (copies of the base block)."""
    t = _template(seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    full, rest = divmod(n_events, t.n)
    with open(path, "wb") as out:
        for c in range(full):
            out.write(t.copy(c))
        if rest:
            out.write(t.copy(full)[: t.line_ends[rest - 1]])
    return path


def _base_table(seed: int) -> tuple[pa.Table, int]:
    w = base_block(seed)
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for e in w.events:
        for name in CANONICAL[1:]:
            cols[name].append(e.get(name))
        extras = {k: v for k, v in e.items() if k not in CANONICAL}
        if "held_by" in extras:
            extras["held_by"] += "." + MARK.decode()
        cols["attrs"].append(orjson.dumps(extras).decode())
    cols["ts"] = [0] * len(w.events)
    table = pa.table({n: pa.array(cols[n], type=SCHEMA.field(n).type) for n in SCHEMA.names
                      if n != "ts"})
    ts = pa.array([EPOCH_US + us for us in w.skewed_us], type=pa.int64())
    return table, _template(seed).span_hours, ts  # type: ignore[return-value]


@functools.lru_cache(maxsize=4)
def _arrow_template(seed: int) -> tuple[pa.Table, int, pa.Array]:
    return _base_table(seed)  # type: ignore[return-value]


def _copy_table(seed: int, c: int) -> pa.Table:
    table, span_hours, ts = _arrow_template(seed)
    suffix = pa.scalar(f".{c:07d}")
    shift = pa.scalar(c * span_hours * HOUR, type=pa.int64())
    cols: dict[str, pa.Array] = {
        "ts": pc.add(ts, shift).cast(pa.timestamp("us", tz="UTC"))}
    for name in SCHEMA.names[1:]:
        col = table[name]
        if name in RENAMED:
            col = pc.binary_join_element_wise(col, suffix, "")
        elif name == "attrs":
            col = pc.replace_substring(col, MARK.decode(), f"{c:07d}")
        cols[name] = col
    return pa.table(cols, schema=SCHEMA)


def arrow_batches(n_events: int, seed: int = 7, batch_rows: int = 1_000_000
                  ) -> Iterator[pa.Table]:
    """The same events as `write_jsonl`, as Arrow tables of `batch_rows` canonical rows."""
    pending: list[pa.Table] = []
    pending_rows = 0
    produced = 0
    c = 0
    while produced < n_events:
        t = _copy_table(seed, c)
        t = t.slice(0, min(t.num_rows, n_events - produced))
        produced += t.num_rows
        c += 1
        pending.append(t)
        pending_rows += t.num_rows
        while pending_rows >= batch_rows:
            merged = pa.concat_tables(pending)
            yield merged.slice(0, batch_rows).combine_chunks()
            rest = merged.slice(batch_rows)
            pending, pending_rows = [rest], rest.num_rows
    if pending_rows:
        yield pa.concat_tables(pending).combine_chunks()


def truth(n_events: int, seed: int = 7) -> dict[str, Any]:
    """Ground truth of the complete copies in `n_events` (a partial last copy is left out)."""
    t = _template(seed)
    base = base_block(seed).truth
    copies = n_events // t.n
    out: dict[str, Any] = {k: v for k, v in base.items()
                           if k in ("seed", "rates", "clock_offsets_ms", "skewed_workers",
                                    "clock_skew_tolerance_ms", "stampede_rule")}
    out.update(events=n_events, complete_copies=copies, events_per_copy=t.n,
               copy_shift_hours=t.span_hours, id_suffix=".<copy:07d>")
    for section in ("duplicates", "lock_overruns", "split_brains", "stampedes", "unobservable",
                    "otlp_lost_executions"):
        rows = []
        for c in range(copies):
            for row in base[section]:
                rows.append(_rename(row, c, t.span_hours))
        out[section] = rows
    return out


_ID_KEYS = {"key", "job_id", "job_ids", "lock_key", "lock_owner", "overlapped_by", "owners",
            "keys", "resource_key"}
_TS_KEYS = {"start", "end", "first_ts", "last_ts", "expired_at", "execution_end"}


def _rename(row: dict[str, Any], c: int, span_hours: int) -> dict[str, Any]:
    from datetime import datetime

    suffix = f".{c:07d}"
    out = {}
    for k, v in row.items():
        if k in _ID_KEYS and isinstance(v, str):
            v = v + suffix
        elif k in _ID_KEYS and isinstance(v, list):
            v = [x + suffix for x in v]
        elif k in _TS_KEYS and isinstance(v, str):
            dt = datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ")
            v = (dt + timedelta(hours=c * span_hours)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out[k] = v
    return out
