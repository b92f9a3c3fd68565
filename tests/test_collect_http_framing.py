"""The HTTP receiver frames bodies as RFC 9112 says: a body shorter than announced, two
Content-Lengths, or Transfer-Encoding with Content-Length are refused and store nothing;
chunked bodies are read; /stats and /metrics need the token; the Bearer scheme is
case-insensitive. Spoken over raw sockets, as a client that gets framing wrong would."""

from __future__ import annotations

import errno
import http.client
import socket
from pathlib import Path

import grpc
import orjson
import pyarrow as pa
import pytest
from collect_support import job_spans, raw_count, running
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from store.embedded import EmbeddedStore

LINES = b"".join(
    orjson.dumps({"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": f"j{i}"}) + b"\n"
    for i in range(3)
)


def _head(*headers: str, path: str = "/v1/jsonlines") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/x-ndjson", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunked(body: bytes, size: int = 50) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """One answer read off the connection: (status, body)."""
    answer = http.client.HTTPResponse(sock)
    answer.begin()
    return answer.status, answer.read()


def _exchange(port: int, request: bytes, half_close: bool = False) -> tuple[int, bytes]:
    """Send raw bytes, optionally half-close, and read one answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return _answer(sock)


@pytest.fixture
def collector(tmp_path: Path):
    store = EmbeddedStore(tmp_path / "store")
    with running(store, max_body_bytes=100_000) as running_collector:
        running_collector.store = store  # type: ignore[attr-defined]
        yield running_collector


def test_a_body_shorter_than_its_content_length_is_refused(collector) -> None:
    request = _head(f"Content-Length: {len(LINES) + 10}") + LINES
    status, answer = _exchange(collector.http.port, request, half_close=True)
    assert status == 400, answer
    assert b"ended after" in answer
    assert raw_count(collector.store) == 0


def test_two_different_content_lengths_are_refused(collector) -> None:
    request = _head(f"Content-Length: {len(LINES)}", f"Content-Length: {len(LINES) - 1}")
    status, answer = _exchange(collector.http.port, request + LINES)
    assert status == 400, answer
    assert raw_count(collector.store) == 0


@pytest.mark.parametrize("expect", [[], ["Expect: 100-continue"]])
def test_a_content_length_that_is_not_ascii_digits_is_refused(collector, expect) -> None:
    status, _ = _exchange(collector.http.port, _head("Content-Length: ²", *expect) + LINES)
    assert status == 400


def test_chunked_with_a_content_length_is_refused_and_nothing_stored(collector) -> None:
    body = _chunked(LINES)
    request = _head("Transfer-Encoding: chunked", f"Content-Length: {len(body)}") + body
    status, answer = _exchange(collector.http.port, request)
    assert status == 400, answer
    assert raw_count(collector.store) == 0


def test_a_transfer_coding_it_cannot_decode_gets_501(collector) -> None:
    request = _head("Transfer-Encoding: gzip, chunked") + _chunked(LINES)
    assert _exchange(collector.http.port, request)[0] == 501
    assert raw_count(collector.store) == 0


def test_a_chunked_body_is_decoded_and_the_connection_kept(collector) -> None:
    spans = encode_spans(job_spans(2)).SerializeToString()
    with socket.create_connection(("127.0.0.1", collector.http.port), timeout=10) as sock:
        sock.sendall(_head("Transfer-Encoding: chunked") + _chunked(LINES, 7))
        status, answer = _answer(sock)
        assert status == 200, answer
        assert orjson.loads(answer)["accepted"] == 3
        extensions = b"".join(
            b"%x;name=value\r\n%s\r\n" % (len(spans[i : i + 100]), spans[i : i + 100])
            for i in range(0, len(spans), 100)
        ) + b"0\r\nX-Trailer: yes\r\n\r\n"
        head = _head("Transfer-Encoding: Chunked", path="/v1/traces").replace(
            b"application/x-ndjson", b"application/x-protobuf")
        sock.sendall(head + extensions)
        assert _answer(sock)[0] == 200  # the same connection served the next request
    assert raw_count(collector.store) == 3 + 8


def test_a_chunked_body_over_the_size_limit_gets_413(collector) -> None:
    body = _chunked(LINES * 2000, 60_000)  # 270 kB against a 100 kB limit
    status, _ = _exchange(collector.http.port, _head("Transfer-Encoding: chunked") + body)
    assert status == 413
    assert raw_count(collector.store) == 0


@pytest.mark.parametrize("cut", [b"3\r\nabc", b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcde"])
def test_a_broken_chunked_body_is_refused(collector, cut: bytes) -> None:
    request = _head("Transfer-Encoding: chunked") + _chunked(LINES)[:-5] + cut
    status, _ = _exchange(collector.http.port, request, half_close=True)
    assert status == 400
    assert raw_count(collector.store) == 0
    assert collector.collector.health()["bodies_held_bytes"] == 0


def _get(port: int, path: str, authorization: str | None = None) -> tuple[int, bytes]:
    headers = [f"Authorization: {authorization}"] if authorization else []
    request = ("\r\n".join([f"GET {path} HTTP/1.1", "Host: x", *headers]) + "\r\n\r\n").encode()
    return _exchange(port, request)


def test_stats_and_metrics_need_the_token_and_healthz_does_not(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), token="s3cret") as collector:
        port = collector.http.port
        for path in ("/stats", "/metrics"):
            assert _get(port, path)[0] == 401
            assert _get(port, path, "Bearer wrong")[0] == 401
            assert _get(port, path, "Bearer s3cret")[0] == 200
        assert _get(port, "/healthz")[0] == 200


def test_no_answer_names_the_store_path(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store")) as collector:
        for path in ("/stats", "/healthz", "/metrics"):
            status, answer = _get(collector.http.port, path)
            assert status == 200
            assert str(tmp_path).encode() not in answer
        assert orjson.loads(_get(collector.http.port, "/stats")[1])["store"] == "embedded"


class ReadOnlyDisk(EmbeddedStore):
    """An embedded store whose writes fail with an OSError naming a file in it."""

    def write_hot(self, table: pa.Table) -> int:
        raise OSError(errno.EROFS, "Read-only file system", str(self.root / "hot" / "x"))


def test_a_write_error_is_told_without_the_path_it_names(tmp_path: Path) -> None:
    with running(ReadOnlyDisk(tmp_path / "store")) as collector:
        request = _head(f"Content-Length: {len(LINES)}") + LINES
        status, answer = _exchange(collector.http.port, request)
        assert status == 503 and b"Read-only file system" in answer
        health = _get(collector.http.port, "/stats")[1]
    assert b"Read-only file system" in health
    for said in (answer, health):
        assert str(tmp_path).encode() not in said


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(tmp_path: Path, scheme: str) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, token="s3cret") as collector:
        request = _head(f"Authorization: {scheme} s3cret", f"Content-Length: {len(LINES)}")
        assert _exchange(collector.http.port, request + LINES)[0] == 200
        assert _get(collector.http.port, "/stats", f"{scheme} s3cret")[0] == 200
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(
            encode_spans(job_spans(1)), timeout=10,
            metadata=(("authorization", f"{scheme} s3cret"),))
        channel.close()
    assert raw_count(store) == 3 + 4


def test_the_token_still_has_to_match_whatever_the_scheme_case(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), token="s3cret") as collector:
        for given in ("bearer S3CRET", "Basic s3cret", "s3cret", "Bearer", "Bearers3cret"):
            request = _head(f"Authorization: {given}", f"Content-Length: {len(LINES)}")
            assert _exchange(collector.http.port, request + LINES)[0] == 401, given
