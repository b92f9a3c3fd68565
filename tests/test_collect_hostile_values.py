"""Values the store cannot hold (numbers too large for their column, nesting too deep)
refuse their own record, with its reason, and every other record of the batch is kept, on
every decoding path; OTLP times are nanoseconds, whatever their size."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from collect_support import ROOT, post, rows, running
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support.trace_decoders import native_and_reference

from collectors.blocks import MIN_SPLIT_LINES, BlockDecoder
from collectors.jsonlines import decode_lines
from collectors.mapping import DEFAULT_MAPPING
from collectors.normalise import MAX_DEPTH, Normaliser
from collectors.otlp import decode_logs, decode_traces
from collectors.otlp_columns import decode_traces_table
from collectors.service.bodies import BodyError, decode_otlp
from store.embedded import EmbeddedStore

T0 = 1_760_000_000_000_000_000
PB, JSON = "application/x-protobuf", "application/json"
GOOD = {"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": "j", "delivery_attempt": 1}


def _nested(depth: int, inner: Any = 1) -> Any:
    value = inner
    for _ in range(depth):
        value = {"a": value}
    return value


def _deep(depth: int, opener: bytes = b'{"a":', closer: bytes = b"}") -> bytes:
    """A valid line whose `deep` value nests `depth` levels (written by hand: orjson
    refuses to write more than 255)."""
    return (b'{"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": "j", "deep": '
            + opener * depth + b"1" + closer * depth + b"}")


# (what the line holds, the words its rejection must name)
HOSTILE_LINES: list[tuple[bytes, tuple[str, ...]]] = [
    (orjson.dumps({**GOOD, "delivery_attempt": 2**31}), ("delivery_attempt", "2147483648")),
    (orjson.dumps({**GOOD, "celery.retries": 2**31 - 1, "delivery_attempt": None}),
     ("delivery_attempt",)),
    (orjson.dumps({**GOOD, "lock_ttl_ms": 2**64 - 1}), ("lock_ttl_ms",)),
    (orjson.dumps({**GOOD, "visibility_timeout_ms": 1e30}), ("visibility_timeout_ms",)),
    (orjson.dumps({**GOOD, "lock_ttl_ms": "9" * 30}), ("lock_ttl_ms",)),
    (orjson.dumps({**GOOD, "lock_ttl_ms": "9" * 5000}), ("lock_ttl_ms",)),
    (orjson.dumps({**GOOD, "ts": 1e30}), ("timestamp",)),
    (orjson.dumps({**GOOD, "ts": -90_000_000_000}), ("timestamp out of range",)),  # year -882
    (orjson.dumps({**GOOD, "ts": "1e400"}), ("timestamp",)),
    (b'{"ts": 1, "event": "deliver", "job_id": "j", "lock_ttl_ms": 123456789012345678901234}',
     ("lock_ttl_ms",)),
    (_deep(200), ("nested",)),
    (_deep(300, b"[", b"]"), ("nested",)),
    (_deep(MAX_DEPTH), ("nested",)),
]


def _block(good: int) -> tuple[bytes, list[int]]:
    """`good` valid lines with every hostile line among them; the hostile line numbers."""
    lines = [orjson.dumps({**GOOD, "job_id": f"j{i}"}) for i in range(good)]
    numbers = []
    for k, (line, _) in enumerate(HOSTILE_LINES):
        at = (k + 1) * good // (len(HOSTILE_LINES) + 1) + k
        lines.insert(at, line)
        numbers.append(at + 1)
    return b"\n".join(lines) + b"\n", numbers


def _assert_each_hostile_line_rejected(rejected: list, numbers: list[int], where: str) -> None:
    assert [r.where for r in rejected] == [f"{where}:{n}" for n in numbers]
    for reject, (_, words) in zip(rejected, HOSTILE_LINES, strict=True):
        assert all(word in reject.reason for word in words), (reject.reason, words)


@pytest.mark.parametrize("good", [3, 4 * MIN_SPLIT_LINES], ids=["per-line", "column-wise"])
def test_a_json_line_the_store_cannot_hold_is_rejected_alone(good: int) -> None:
    block, numbers = _block(good)
    result = BlockDecoder(DEFAULT_MAPPING).decode(block, 1, "f")
    _assert_each_hostile_line_rejected(result.rejected, numbers, "f")
    assert result.table.num_rows == good


def test_the_per_line_reference_rejects_the_same_lines_with_the_same_reasons() -> None:
    block, numbers = _block(10)
    lines = list(enumerate(block.splitlines(), start=1))
    decoded = decode_lines(lines, Normaliser(), "f")
    _assert_each_hostile_line_rejected(decoded.rejected, numbers, "f")
    assert len(decoded.rows) == 10


def test_nesting_up_to_the_limit_is_kept_as_it_was() -> None:
    # The record is the first level, the array the last.
    line = orjson.dumps({**GOOD, "deep": _nested(MAX_DEPTH - 2, [1])})
    for decoded in (
        decode_lines([(1, line)], Normaliser(), "f").rows,
        BlockDecoder(DEFAULT_MAPPING).decode(line, 1, "f").table.to_pylist(),
    ):
        assert len(decoded) == 1
        attrs = orjson.loads(decoded[0]["attrs"])
        assert attrs == {"deep." + ".".join(["a"] * (MAX_DEPTH - 2)): [1]}


def test_cli_ingest_reports_hostile_lines_and_stores_the_rest(tmp_path: Path) -> None:
    # A real process: a reader that crashed on deep nesting would take pytest with it.
    good = [orjson.dumps({**GOOD, "job_id": f"j{i}"}) for i in range(200)]
    hostile = [
        orjson.dumps({**GOOD, "delivery_attempt": 2**31}),
        _deep(1000),
    ]
    path = tmp_path / "w.jsonl"
    path.write_bytes(b"\n".join([*good[:100], *hostile, *good[100:]]) + b"\n")
    command = [sys.executable, "-c", "from dupescope.cli import main; main()", "ingest",
               "--store", str(tmp_path / "store"), str(path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    output = done.stdout + done.stderr
    assert f"{path}:101: delivery_attempt out of range" in output
    assert f"{path}:102: nested deeper than {MAX_DEPTH} levels" in output
    assert "200 events stored from 1 file(s), 202 lines; 2 rejected" in output


# ---- OTLP ------------------------------------------------------------------------------


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(int_value=value))


def _traces(*spans: tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]
            ) -> ExportTraceServiceRequest:
    """One execution span per (attributes, [(step, step attributes)])."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i, (attrs, steps) in enumerate(spans):
        span = scope.spans.add()
        span.trace_id, span.span_id = bytes([i + 1]) * 16, bytes([i + 1]) * 8
        span.name = "process"
        span.start_time_unix_nano = T0 + i * 1_000_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 5_000_000
        span.attributes.extend([_kv("messaging.message.id", f"m{i}"),
                                *(_kv(k, v) for k, v in attrs.items())])
        for k, (name, step_attrs) in enumerate(steps):
            event = span.events.add()
            event.name, event.time_unix_nano = name, span.start_time_unix_nano + k + 1
            event.attributes.extend(_kv(key, v) for key, v in step_attrs.items())
    return request


HOSTILE_SPANS = _traces(
    ({"delivery_attempt": 1}, [("ack", {})]),
    ({"delivery_attempt": "2147483648"}, []),
    ({"delivery_attempt": 2**31}, [("ack", {})]),
    ({"delivery_attempt": 1}, [("lock_acquire", {"lock_ttl_ms": 1e30}), ("ack", {})]),
    ({"delivery_attempt": 1, "visibility_timeout_ms": "99999999999999999999"}, []),
    ({"job.delivery_attempt": 2, "celery.retries": 2**31 - 1}, []),
    ({"delivery_attempt": 3}, []),
)


def test_otlp_spans_the_store_cannot_hold_are_rejected_alone() -> None:
    request = HOSTILE_SPANS
    result = decode_otlp("traces", request.SerializeToString(), "protobuf", Normaliser(), "s")
    assert result.rejected == 4
    assert "delivery_attempt out of range" in result.message
    assert "lock_ttl_ms out of range" in result.message
    assert "visibility_timeout_ms out of range" in result.message
    assert "spans[1]" in result.message and "spans[3] event 0" in result.message
    jobs = sorted(set(result.table["job_id"].to_pylist()))
    assert jobs == ["m0", "m3", "m5", "m6"]  # m2's ack has its span's attempt too
    assert result.table.num_rows == 2 + 2 + 1 + 1  # m3 keeps its deliver and ack


def test_the_native_decoder_agrees_with_the_reference_on_values_out_of_range() -> None:
    native, reference = native_and_reference(HOSTILE_SPANS)
    assert native[0].equals(reference[0])
    assert native[1:] == reference[1:]
    assert len(native[1]) == 5


def test_otlp_log_records_the_store_cannot_hold_are_rejected_alone() -> None:
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for i, extra in enumerate([{}, {"delivery_attempt": 2**31}, {"timestamp": 1e30},
                               {"lock_ttl_ms": 1e300}, {"timestamp": float("inf")}, {}]):
        record = records.add()
        record.time_unix_nano = T0 + i
        record.attributes.extend(
            [_kv("event", "deliver"), _kv("job_id", f"l{i}"),
             *(_kv(k, v) for k, v in extra.items())])
    result = decode_otlp("logs", request.SerializeToString(), "protobuf", Normaliser(), "s")
    assert result.rejected == 4
    assert "log record 0.0.1: delivery_attempt out of range" in result.message
    assert "log record 0.0.2: timestamp out of range" in result.message
    assert "log record 0.0.4: not a timestamp" in result.message
    assert result.table["job_id"].to_pylist() == ["l0", "l5"]


def _otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    document = json_format.MessageToDict(request)
    for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId"):
            span[key] = base64.b64decode(span[key]).hex()
    return document


def test_an_otlp_json_integer_wider_than_64_bits_refuses_its_record_alone() -> None:
    document = _otlp_json(_traces(({"delivery_attempt": 1}, []),
                                  ({"delivery_attempt": 1, "lock_ttl_ms": 1}, []),
                                  ({"delivery_attempt": 1, "note": 1}, [])))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["attributes"][2]["value"] = {"intValue": "99999999999999999999"}
    spans[2]["attributes"][2]["value"] = {"intValue": 2**63}  # a JSON number
    body = json.dumps(document).encode()  # orjson refuses to write integers this wide
    result = decode_otlp("traces", body, "json", Normaliser(), "s")
    assert result.rejected == 1
    assert "spans[1]: lock_ttl_ms out of range" in result.message
    assert result.table["job_id"].to_pylist() == ["m0", "m2"]
    kept = orjson.loads(result.table["attrs"][1].as_py())
    assert kept["note"] == str(2**63)  # kept as it was written, as text


def _deep_otlp_json(kind: str, depth: int, unknown: bool = False) -> bytes:
    """An OTLP/JSON request with an attribute nested `depth` kvlists deep, or (`unknown`)
    a field protobuf does not know holding `depth` nested arrays."""
    value = '{"stringValue":"x"}'
    for _ in range(0 if unknown else depth):
        value = '{"kvlistValue":{"values":[{"key":"k","value":' + value + "}]}}"
    attribute = '{"key":"deep","value":' + value + "}"
    extra = ',"extra":' + "[" * depth + "]" * depth if unknown else ""
    if kind == "traces":
        return ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "01" * 16
                + '","spanId":"' + "02" * 8 + '","name":"deliver","attributes":['
                + attribute + "]}]}]}]" + extra + "}").encode()
    return ('{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":['
            + attribute + "]}]}]}]" + extra + "}").encode()


@pytest.mark.parametrize("kind", ["traces", "logs"])
@pytest.mark.parametrize("depth,unknown", [(40, False), (150, False), (1000, True)])
def test_an_otlp_json_body_nested_too_deeply_is_refused_with_400(
    kind: str, depth: int, unknown: bool
) -> None:
    with pytest.raises(BodyError) as refused:
        decode_otlp(kind, _deep_otlp_json(kind, depth, unknown), "json", Normaliser(), "s")
    assert refused.value.status == 400


@pytest.mark.parametrize("where", ["job span", "ignored span", "log record"])
def test_an_otlp_protobuf_body_nested_too_deeply_is_refused_with_400(where: str) -> None:
    # Also where the native decoder would read past the span: it hands such a body back.
    value = AnyValue(string_value="x")
    for _ in range(300):
        nested = AnyValue()
        nested.kvlist_value.values.add(key="k").value.CopyFrom(value)
        value = nested
    kind = "logs" if where == "log record" else "traces"
    if kind == "traces":
        request: Any = _traces(({"delivery_attempt": 1}, []))
        span = request.resource_spans[0].scope_spans[0].spans[0]
        if where == "ignored span":
            span.name = "GET /health"
            del span.attributes[:]
        span.attributes.add(key="d").value.CopyFrom(value)
    else:
        request = ExportLogsServiceRequest()
        request.resource_logs.add().scope_logs.add().log_records.add().body.CopyFrom(value)
    with pytest.raises(BodyError) as refused:
        decode_otlp(kind, request.SerializeToString(), "protobuf", Normaliser(), "s")
    assert refused.value.status == 400


# ---- OTLP times ------------------------------------------------------------------------


TIMES = [1, 1_000_000_000, 99_999_999_999_999, T0, 2**64 - 1]


def _ts(table: pa.Table) -> list[int]:
    return table["ts"].cast(pa.int64()).to_pylist()


@pytest.mark.parametrize("time_ns", TIMES)
def test_a_span_start_time_is_nanoseconds_on_every_trace_path(time_ns: int) -> None:
    request = _traces(({"delivery_attempt": 1}, [("ack", {})]))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.start_time_unix_nano = time_ns
    span.events[0].time_unix_nano = time_ns
    expected = [time_ns // 1000, time_ns // 1000]
    normaliser = Normaliser()
    assert [row["ts"] for row in decode_traces(request, normaliser, "s").rows] == expected
    assert _ts(decode_traces_table(request, normaliser, "s")[0]) == expected
    native = decode_otlp("traces", request.SerializeToString(), "protobuf", normaliser, "s")
    assert sorted(_ts(native.table)) == expected


@pytest.mark.parametrize("time_ns", TIMES)
def test_a_log_record_time_is_nanoseconds(time_ns: int) -> None:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.time_unix_nano = time_ns
    record.attributes.extend([_kv("event", "enqueue"), _kv("job_id", "l")])
    assert [row["ts"] for row in decode_logs(request, Normaliser(), "s").rows] == [
        time_ns // 1000]


def test_the_epoch_unit_is_still_read_from_a_json_lines_timestamp() -> None:
    line = orjson.dumps({**GOOD, "ts": 1_700_000_000})  # seconds, by its size
    rows = decode_lines([(1, line)], Normaliser(), "f").rows
    assert rows[0]["ts"] == 1_700_000_000_000_000
    table = BlockDecoder(DEFAULT_MAPPING).decode(line, 1, "f").table
    assert pc.equal(table["ts"].cast(pa.int64()), 1_700_000_000_000_000).to_pylist() == [True]


# ---- through a running collector -------------------------------------------------------


def _log_request(*extras: dict[str, Any]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for i, extra in enumerate(extras):
        record = records.add()
        record.time_unix_nano = T0 + i
        record.attributes.extend([_kv("event", "enqueue"), _kv("job_id", f"l{i}"),
                                  *(_kv(k, v) for k, v in extra.items())])
    return request


def test_every_receiver_keeps_the_rest_of_a_batch_and_names_what_it_refused(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path / "store")
    block, _ = _block(3)
    spans = HOSTILE_SPANS
    logs = _log_request({}, {"delivery_attempt": 2**31}, {"lock_ttl_ms": 1e30})
    with running(store) as collector:
        base = f"http://127.0.0.1:{collector.http.port}"
        for _ in range(2):  # a resend gets the same answer
            status, _, answer = post(base + "/v1/jsonlines", block, "application/x-ndjson")
            assert status == 200, answer
            lines = orjson.loads(answer)
            assert (lines["accepted"], lines["rejected"]) == (3, len(HOSTILE_LINES))
            assert "http:/v1/jsonlines:2: delivery_attempt out of range" in lines["error_message"]

            status, _, answer = post(base + "/v1/traces", spans.SerializeToString(), PB)
            assert status == 200, answer
            traced = ExportTraceServiceResponse.FromString(answer).partial_success
            assert traced.rejected_spans == 4 and "out of range" in traced.error_message

            status, _, answer = post(base + "/v1/traces", orjson.dumps(_otlp_json(spans)), JSON)
            assert status == 200, answer
            assert orjson.loads(answer)["partialSuccess"]["rejectedSpans"] == "4"

            status, _, answer = post(base + "/v1/logs", logs.SerializeToString(), PB)
            assert status == 200, answer
            logged = ExportLogsServiceResponse.FromString(answer).partial_success
            assert logged.rejected_log_records == 2

            channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
            answer = trace_service_pb2_grpc.TraceServiceStub(channel).Export(spans, timeout=10)
            channel.close()
            assert answer.partial_success.rejected_spans == 4
    stored = rows(store)
    assert stored.num_rows == 3 + 6 + 1  # lines, span rows, log records (repeats collapse)


@pytest.mark.parametrize("kind", ["traces", "logs"])
def test_a_deep_otlp_json_body_gets_400_and_the_collector_serves_on(
    tmp_path: Path, kind: str
) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        base = f"http://127.0.0.1:{collector.http.port}"
        for body in (_deep_otlp_json(kind, 1000, unknown=True), _deep_otlp_json(kind, 240)):
            status, _, answer = post(f"{base}/v1/{kind}", body, JSON)
            assert status == 400, answer
            assert b"nested" in answer or b"too deep" in answer
        body = orjson.dumps(_otlp_json(_traces(({"delivery_attempt": 1}, []))))
        assert post(base + "/v1/traces", body, JSON)[0] == 200


def test_a_deep_json_line_is_refused_alone_on_the_jsonlines_path(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    body = b"\n".join([orjson.dumps(GOOD), _deep(1000), orjson.dumps({**GOOD, "job_id": "k"}),
                       _deep_otlp_json("traces", 1000, unknown=True)])
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        status, _, answer = post(url, body, "application/x-ndjson")
    assert status == 200, answer
    said = orjson.loads(answer)
    assert (said["accepted"], said["rejected"]) == (2, 2)
    assert f"jsonlines:2: nested deeper than {MAX_DEPTH} levels" in said["error_message"]
    assert "jsonlines:4: invalid OTLP JSON: nested deeper than" in said["error_message"]
