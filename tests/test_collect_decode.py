"""The collector's fast paths give exactly the rows of the reference code they replace."""

from __future__ import annotations

import random
from typing import Any

import pytest
from support.otlp_spans import MAPPING, mixed_request

from collectors.arrow_batch import rows_to_table
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser, RecordError
from collectors.otlp import decode_traces
from collectors.otlp_columns import decode_traces_table
from sample_data.otlp_requests import trace_request
from store.schema import EVENT_KINDS


class ScanningNormaliser(Normaliser):
    """The plain algorithm: try every spelling of every field, in order."""

    def _take(self, flat: dict[str, Any], canonical: str, present: Any) -> Any:
        for key in self._sources[canonical]:
            if key in flat:
                value = flat.pop(key)
                for other in self._sources[canonical]:
                    flat.pop(other, None)
                return value
        return None


KEYS = [
    "ts", "timestamp", "when", "event", "job.event", "job_id", "job.job_id", "task.uuid",
    "messaging.message.id", "messaging.message_id", "queue", "messaging.destination.name",
    "resource_key", "delivery_attempt", "job.delivery_attempt", "celery.retries",
    "lock_ttl_ms", "worker_id", "service.instance.id", "messaging.operation.type", "other",
]


def _value(rng: random.Random, key: str) -> Any:
    if key in ("ts", "timestamp", "when"):
        return rng.choice([1_760_000_000, "2025-10-09T08:53:20Z", "nope", None])
    if key in ("event", "job.event"):
        return rng.choice([*EVENT_KINDS[:5], "task-received", "bogus"])
    if key in ("delivery_attempt", "job.delivery_attempt", "celery.retries", "lock_ttl_ms"):
        return rng.choice([1, 2, "3", 0, "x", 2.0])
    if key == "messaging.operation.type":
        return rng.choice(["process", "publish", "weird"])
    return rng.choice([f"v{rng.randrange(5)}", 7, None, ["a"]])


@pytest.mark.parametrize("mapping", [FieldMapping(), MAPPING], ids=["builtin", "mapping"])
def test_normaliser_matches_the_scanning_algorithm(mapping: FieldMapping) -> None:
    rng = random.Random(11)
    fast, plain = Normaliser(mapping), ScanningNormaliser(mapping)
    for _ in range(3000):
        record = {key: _value(rng, key) for key in rng.sample(KEYS, rng.randrange(1, 12))}
        outcomes = []
        for normaliser in (fast, plain):
            try:
                outcomes.append(normaliser.normalise(dict(record), uid="u", source="s"))
            except RecordError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], record


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mapping", [FieldMapping(), MAPPING], ids=["builtin", "mapping"])
def test_fast_trace_decoder_equals_decode_traces(seed: int, mapping: FieldMapping) -> None:
    request = mixed_request(seed)
    normaliser = Normaliser(mapping)
    reference = decode_traces(request, normaliser, "src")
    table, rejected, ignored = decode_traces_table(request, normaliser, "src")
    assert table.equals(rows_to_table(reference.rows))
    assert [(r.where, r.reason) for r in rejected] == [
        (r.where, r.reason) for r in reference.rejected
    ]
    assert ignored == reference.ignored
    assert table.num_rows and rejected and ignored  # the case covers all three outcomes


def test_fast_trace_decoder_equals_decode_traces_on_the_benchmark_payload() -> None:
    request = trace_request(3, 200)
    normaliser = Normaliser()
    table, rejected, _ = decode_traces_table(request, normaliser, "src")
    assert not rejected
    assert table.equals(rows_to_table(decode_traces(request, normaliser, "src").rows))
