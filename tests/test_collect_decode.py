"""The collector's fast paths give exactly the rows of the reference code they replace."""

from __future__ import annotations

import random
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from collectors.arrow_batch import rows_to_table
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser, RecordError
from collectors.otlp import decode_traces
from collectors.otlp_columns import decode_traces_table
from sample_data.otlp_requests import trace_request
from store.schema import EVENT_KINDS

MAPPING = FieldMapping(
    fields={"job_id": ("task.uuid",), "resource_key": ("job_id",), "ts": ("when",)},
    events={"task-received": "deliver"},
)


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


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, bytes):
        return KeyValue(key=key, value=AnyValue(bytes_value=value))
    if isinstance(value, list):
        kv = KeyValue(key=key)
        kv.value.array_value.values.extend(_kv("", v).value for v in value)
        return kv
    if isinstance(value, dict):
        kv = KeyValue(key=key)
        kv.value.kvlist_value.values.extend(_kv(k, v) for k, v in value.items())
        return kv
    if value is None:
        return KeyValue(key=key)
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _mixed_request(seed: int) -> ExportTraceServiceRequest:
    """Every span shape the contract allows, and broken ones, with overlapping attributes."""
    rng = random.Random(seed)
    request = ExportTraceServiceRequest()
    for r in range(2):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            [_kv("host.name", f"h{r}"), _kv("process.pid", 10 + r), _kv("queue", "from-resource")]
        )
        scope = resource_spans.scope_spans.add()
        for i in range(60):
            span = scope.spans.add()
            span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
            if rng.random() < 0.5:
                span.parent_span_id = rng.randbytes(8)
            span.name = rng.choice(["process", "deliver", "side_effect", "ack", "GET /", "x"])
            span.start_time_unix_nano = 1_760_000_000_000_000_000 + i * 1000
            span.end_time_unix_nano = span.start_time_unix_nano + 5000
            pool = {
                "job.job_id": f"j{i}", "messaging.message.id": f"m{i}",
                "job.event": rng.choice(["commit", "nope"]), "event": "nack",
                "messaging.operation.type": rng.choice(["process", "publish"]),
                "delivery_attempt": rng.choice([1, 0, "2"]), "tags": ["a", 1],
                "nested": {"k": "v", "n": 2}, "blob": b"\x01\x02", "ratio": 0.5,
                "empty": None, "queue": "q", "flag": True,
            }
            for key in rng.sample(sorted(pool), rng.randrange(0, len(pool))):
                span.attributes.append(_kv(key, pool[key]))
            for e in range(rng.randrange(0, 4)):
                event = span.events.add()
                event.name = rng.choice(["lock_acquire", "exception", "ack", "side_effect"])
                event.time_unix_nano = span.start_time_unix_nano + e
                if rng.random() < 0.6:
                    event.attributes.extend([
                        _kv("lock_key", "L"), _kv("job.job_id", f"e{i}"), _kv("queue", "ev"),
                        _kv("lock_ttl_ms", rng.choice([100, "bad"])),
                    ])
    return request


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mapping", [FieldMapping(), MAPPING], ids=["builtin", "mapping"])
def test_fast_trace_decoder_equals_decode_traces(seed: int, mapping: FieldMapping) -> None:
    request = _mixed_request(seed)
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
