"""Bad bodies get the right 4xx, the collector stays up, and the next valid batch lands;
a token is enforced; a full queue answers 429 / RESOURCE_EXHAUSTED instead of growing."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import random
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from collect_support import (
    SlowStore,
    expect_100,
    get_json,
    job_spans,
    post,
    raw_count,
    running,
)
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from store.embedded import EmbeddedStore

PB = "application/x-protobuf"
JSON = "application/json"


def _valid_body() -> bytes:
    return encode_spans(job_spans(2)).SerializeToString()


def _corpus() -> list[tuple[str, str, bytes, dict[str, str], int]]:
    """(name, path, body, headers, expected status)."""
    valid = _valid_body()
    rng = random.Random(7)
    huge = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"' + b"x" * 3_000_000 + b'"}]}]}]}'
    return [
        ("truncated protobuf", "/v1/traces", valid[: len(valid) // 2], {}, 400),
        ("random protobuf", "/v1/traces", rng.randbytes(4096), {}, 400),
        ("random protobuf logs", "/v1/logs", rng.randbytes(777), {}, 400),
        ("invalid JSON", "/v1/traces", b'{"resourceSpans": [', {"ct": JSON}, 400),
        ("JSON array", "/v1/traces", b"[1, 2]", {"ct": JSON}, 400),
        ("wrong JSON types", "/v1/traces",
         b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": {"a": 1}}]}]}]}',
         {"ct": JSON}, 400),
        ("logs body on traces", "/v1/traces", b'{"resourceLogs": []}', {"ct": JSON}, 400),
        ("bad hex id", "/v1/traces",
         b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz' + b"0" * 30 + b'"}]}]}]}',
         {"ct": JSON}, 400),
        ("huge attribute value", "/v1/traces", huge, {"ct": JSON}, 413),
        ("gzip bomb", "/v1/traces", gzip.compress(b"\0" * 40_000_000), {"ce": "gzip"}, 413),
        ("not gzip", "/v1/traces", b"plain bytes", {"ce": "gzip"}, 400),
        ("deflate bomb", "/v1/traces", zlib.compress(b"\0" * 40_000_000), {"ce": "deflate"},
         413),
        ("not deflate", "/v1/traces", b"plain bytes", {"ce": "deflate"}, 400),
        ("truncated deflate", "/v1/traces", zlib.compress(valid)[:-9], {"ce": "deflate"}, 400),
        ("bytes after deflate", "/v1/traces", zlib.compress(valid) + b"x", {"ce": "deflate"},
         400),
        ("unknown encoding", "/v1/traces", valid, {"ce": "br"}, 415),
        ("text/html", "/v1/traces", b"<html>", {"ct": "text/html"}, 415),
        ("no content type", "/v1/traces", valid, {"ct": ""}, 415),
        ("protobuf on jsonlines", "/v1/jsonlines", valid, {}, 415),
        ("unknown path", "/v1/metrics", valid, {}, 404),
    ]


def test_bad_bodies_get_4xx_and_the_collector_stays_up(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, max_body_bytes=2_000_000) as collector:
        base = f"http://127.0.0.1:{collector.http.port}"
        for name, path, body, headers, expected in _corpus():
            sent = {}
            if "ce" in headers:
                sent["Content_Encoding"] = headers["ce"]
            status, answer_headers, answer = post(
                base + path, body, headers.get("ct", PB), **sent
            )
            assert status == expected, (name, status, answer[:200])
            if path != "/v1/jsonlines" and status == 400:
                if headers.get("ct", PB) == PB:
                    assert status_pb2.Status.FromString(answer).message, name
                else:
                    assert b'"message"' in answer, name
            ok, _, _ = post(base + "/v1/traces", _valid_body(), PB)
            assert ok == 200, f"valid batch refused after {name}"
        health = get_json(base + "/healthz")
    assert health["bad_requests"] == len(_corpus())
    assert raw_count(store) == len(_corpus()) * 8


def test_grpc_refuses_a_bad_body_and_keeps_serving(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\xff\xff\xff\xff garbage", timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(encode_spans(job_spans(2)), timeout=10)
        channel.close()
    assert raw_count(store) == 8


def test_token_is_required_when_configured(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, token="s3cret") as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        assert post(url, _valid_body(), PB)[0] == 401
        assert post(url, _valid_body(), PB, Authorization="Bearer wrong")[0] == 401
        assert post(url, _valid_body(), PB, Authorization="Bearer s3cret")[0] == 200
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode_spans(job_spans(1)), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        stub.Export(encode_spans(job_spans(1)), timeout=10,
                    metadata=(("authorization", "Bearer s3cret"),))
        channel.close()
    assert raw_count(store) == 8 + 4


def test_full_queue_answers_429_and_resource_exhausted(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path / "store"), blocked=True)
    with running(store, queue_rows=16) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        answers: list[int] = []
        first = threading.Thread(target=lambda: answers.append(post(url, _valid_body(), PB)[0]))
        first.start()  # 8 rows: taken by the writer, which blocks on the store
        second = threading.Thread(target=lambda: answers.append(post(url, _valid_body(), PB)[0]))
        for _ in range(100):
            if collector.collector.pipeline.depth:
                break
            threading.Event().wait(0.02)
        second.start()  # 8 more rows wait behind the blocked write: 16, full
        for _ in range(100):
            if collector.collector.pipeline.depth >= 16:
                break
            threading.Event().wait(0.02)
        status, headers, _ = post(url, _valid_body(), PB)
        assert status == 429 and headers.get("Retry-After") == "1"
        stub = trace_service_pb2_grpc.TraceServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        )
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode_spans(job_spans(1)), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        store.gate.set()
        first.join(10)
        second.join(10)
        assert answers == [200, 200]
        assert post(url, _valid_body(), PB)[0] == 200
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert health["throttled"] == 2
    assert raw_count(store) == 24


@contextlib.contextmanager
def _full_queue(tmp_path: Path, token: str | None = None) -> Iterator[Any]:
    """A running collector whose queue is full: 8 rows, the first batch's, wait behind a
    store write that does not return until the block ends."""
    store = SlowStore(EmbeddedStore(tmp_path / "store"), blocked=True)
    with running(store, queue_rows=8, token=token) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        first = threading.Thread(target=lambda: post(url, _valid_body(), PB, **auth))
        first.start()
        for _ in range(100):
            if collector.collector.pipeline.depth >= 8:
                break
            threading.Event().wait(0.02)
        try:
            yield collector
        finally:
            store.gate.set()
            first.join(10)


def test_a_full_queue_refuses_a_body_before_reading_it(tmp_path: Path) -> None:
    with _full_queue(tmp_path) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        # Not gzip at all: read and unwrapped, it would be a 400.
        status, headers, _ = post(url, b"plain bytes", PB, Content_Encoding="gzip")
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert status == 429 and headers.get("Retry-After") == "1"
    assert health["throttled"] == 1 and health["bad_requests"] == 0


def test_a_full_queue_still_answers_a_wrong_content_type_415(tmp_path: Path) -> None:
    with _full_queue(tmp_path) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        assert post(url, _valid_body(), "text/html")[0] == 415


def test_a_connection_refused_for_a_full_queue_serves_its_next_request(tmp_path: Path) -> None:
    with _full_queue(tmp_path) as collector:
        connection = http.client.HTTPConnection("127.0.0.1", collector.http.port, timeout=10)
        answers = []
        for _ in range(2):  # the refused body is read away, so the second request parses
            connection.request("POST", "/v1/traces", body=_valid_body(),
                               headers={"Content-Type": PB})
            answer = connection.getresponse()
            answer.read()
            answers.append(answer.status)
        connection.close()
    assert answers == [429, 429]


def test_a_full_queue_answers_429_instead_of_100_continue(tmp_path: Path) -> None:
    with _full_queue(tmp_path) as collector:
        assert expect_100(collector.http.port, _valid_body()) == [b"429"]


def test_without_the_token_100_continue_still_ends_in_401(tmp_path: Path) -> None:
    with _full_queue(tmp_path, token="s3cret") as collector:
        assert expect_100(collector.http.port, _valid_body()) == [b"100", b"401"]


def test_100_continue_is_answered_while_the_queue_has_room(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store")) as collector:
        assert expect_100(collector.http.port, _valid_body()) == [b"100", b"200"]
