"""A finished model run: contract events on their emitters' clocks, plus the truth."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import IO, Any

import orjson

from sample_data.model import Model, RawEvent, Settings
from sample_data.rates import Rates
from sample_data.truth import build_truth

# Canonical field order of a JSON line; extras (wait_ms, reason, ...) follow.
CANONICAL = (
    "ts", "event", "job_id", "job_type", "idempotency_key", "resource_key", "queue",
    "delivery_attempt", "worker_id", "lock_key", "lock_owner", "lock_ttl_ms",
    "visibility_timeout_ms", "service_version",
)


def open_out(path: str | Path) -> IO[bytes]:
    """A binary writer; `.gz` paths get a reproducible gzip stream (mtime 0, no name)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = open(path, "wb")  # noqa: SIM115 - closed through the gzip wrapper or by the caller
    if path.suffix == ".gz":
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                             compresslevel=9)  # type: ignore[return-value]
    return raw


class Workload:
    """Events (contract dicts sorted by ts) and the ground truth of one seeded run."""

    def __init__(self, model: Model) -> None:
        self.model = model
        order = sorted(range(len(model.events)),
                       key=lambda i: (self._skewed_us(model.events[i]), i))
        self.raw: list[RawEvent] = [model.events[i] for i in order]
        self.skewed_us: list[int] = [self._skewed_us(e) for e in self.raw]
        self.events: list[dict[str, Any]] = [
            _contract(e, us) for e, us in zip(self.raw, self.skewed_us, strict=True)]
        self.truth: dict[str, Any] = build_truth(model, len(self.events))

    def _skewed_us(self, e: RawEvent) -> int:
        return e.t + self.model.offset_us(e.emitter)

    @property
    def seed(self) -> int:
        return self.model.seed

    def jsonl_bytes(self) -> bytes:
        return b"".join(orjson.dumps(e) + b"\n" for e in self.events)

    def write_jsonl(self, path: str | Path) -> Path:
        """Contract events, one JSON object per line (gzip when the name ends in .gz)."""
        with open_out(path) as out:
            out.write(self.jsonl_bytes())
        return Path(path)

    def truth_json(self) -> str:
        return json.dumps(self.truth, indent=1) + "\n"

    def write_truth(self, path: str | Path) -> Path:
        Path(path).write_text(self.truth_json())
        return Path(path)


def _contract(e: RawEvent, skewed_us: int) -> dict[str, Any]:
    from sample_data.clock import rfc3339

    f = e.fields
    out: dict[str, Any] = {"ts": rfc3339(skewed_us)}
    for name in CANONICAL[1:]:
        if name in f:
            out[name] = f[name]
    for name, value in f.items():
        if name not in out:
            out[name] = value
    return out


def generate(seed: int = 7, target_events: int = 30_000, hours: float = 3.0,
             settings: Settings | None = None, **rates: float) -> Workload:
    """Run the model once. `rates` override single fields of `Rates` (e.g. worker_crash=0).
    `settings` (even `Settings()`) holds the faults fixed per job, so that runs at other
    settings with the same seed and rates meet the same faults; and lays its queue and
    lock settings over the catalogue's."""
    model = Model(seed, target_events, Rates().with_(**rates), hours, settings).run()
    return Workload(model)
