"""OTLP/HTTP (`/v1/traces`, `/v1/logs`), a JSON-lines POST (`/v1/jsonlines`), `/healthz`
and `/metrics` (Prometheus).

Built on the standard library's ThreadingHTTPServer rather than an ASGI stack: every
request blocks until its batch is durable (a group-commit wait), which one thread per
connection expresses directly, and decoding is CPU-bound work that an event loop would
only have to hand to threads anyway. It needs no dependency beyond Python itself.
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collectors.service.auth import bearer_matches
from collectors.service.bodies import (
    JSON_TYPES,
    LINES_TYPES,
    PROTOBUF_TYPES,
    BodyError,
    DecodeResult,
    media_type,
    unwrap,
)
from collectors.service.collector import Admission, Collector, without_paths
from collectors.service.log_limit import SummarisedLog
from collectors.service.metrics import CollectorMetrics
from collectors.service.pipeline import QueueFull, WriteFailed
from collectors.service.tls import HANDSHAKE_TIMEOUT

log = logging.getLogger("dupescope.collect")

DRAIN_LIMIT = 64 * 1024 * 1024
READ_TIMEOUT = 60.0
#: Seconds a kept-alive connection may wait for its next request: longer than clients' own
#: limit (Go's HTTP transport, which the OpenTelemetry Collector's exporters use, closes a
#: connection idle for 90 s), so that the client closes first. Closed by the server first,
#: a connection can be taken for an export just as it closes, and that export fails.
IDLE_TIMEOUT = 120.0
BODY_TIMEOUT = 120.0
OTLP_PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}
LINES_PATH = "/v1/jsonlines"
#: Paths that tell about the collector: with a token set, they need it too (/healthz, for
#: probes, does not).
PRIVATE_PATHS = frozenset({"/stats", "/metrics"})
#: Longest chunk-size line (with extensions) or trailer line of a chunked body.
CHUNK_LINE_LIMIT = 4096
MAX_TRAILERS = 64
_DIGITS = re.compile(r"[0-9]+")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(;[^\r\n]*)?\r?\n")
_GRPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    404: code_pb2.NOT_FOUND,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
    411: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    500: code_pb2.INTERNAL,
    501: code_pb2.UNIMPLEMENTED,
    503: code_pb2.UNAVAILABLE,
}


class FramingError(ValueError):
    """A request whose body's extent cannot be known for sure (RFC 9112 6): answered, and
    the connection closed, since where the next request would begin is unknown."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


CHUNKED = -1  # the body's length, when it comes chunked


def body_length(headers: Any) -> int | None:
    """The announced length of a request's body, CHUNKED, or None when it has neither
    header. FramingError where the headers disagree or cannot be read: a Content-Length
    given twice with two values, one that is not digits, or Transfer-Encoding with
    Content-Length (a request smuggled past a proxy would be framed so), which RFC 9112
    6.3 lets a server refuse."""
    codings = [
        c.strip().lower()
        for value in headers.get_all("Transfer-Encoding") or []
        for c in value.split(",")
        if c.strip()
    ]
    lengths = {
        v.strip() for value in headers.get_all("Content-Length") or [] for v in value.split(",")
    }
    if codings:
        if lengths:
            raise FramingError(400, "both Transfer-Encoding and Content-Length")
        if codings != ["chunked"]:
            raise FramingError(501, f"unsupported Transfer-Encoding {', '.join(codings)!r}")
        return CHUNKED
    if not lengths:
        return None
    if len(lengths) > 1:
        raise FramingError(400, "Content-Length given with different values")
    (length,) = lengths
    if not _DIGITS.fullmatch(length):
        raise FramingError(400, f"Content-Length is not a number: {length[:40]!r}")
    return int(length)


def otlp_response(kind: str, result: DecodeResult) -> Any:
    """The Export*ServiceResponse, with partial_success only when something was refused."""
    if kind == "traces":
        response: Any = ExportTraceServiceResponse()
        if result.rejected:
            response.partial_success.rejected_spans = result.rejected
    else:
        response = ExportLogsServiceResponse()
        if result.rejected:
            response.partial_success.rejected_log_records = result.rejected
    if result.rejected:
        response.partial_success.error_message = result.message
    return response


class Handler(BaseHTTPRequestHandler):
    """One request at a time per connection; keep-alive, as OTLP exporters expect."""

    protocol_version = "HTTP/1.1"
    server_version = "dupescope-collect"
    # Headers and body are separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms per request on a keep-alive connection).
    disable_nagle_algorithm = True
    # Seconds a request may send nothing (a stalled head or body) before its connection is
    # closed: a body's share of the body budget is held until it has arrived.
    timeout = READ_TIMEOUT
    # Seconds a connection may wait for its next request.
    idle_timeout = IDLE_TIMEOUT
    # Seconds a whole body may take to arrive, however it trickles in: its share of the
    # body budget is held meanwhile.
    body_timeout = BODY_TIMEOUT
    collector: Collector  # set on the subclass the server builds
    metrics: CollectorMetrics  # likewise
    floods: SummarisedLog  # likewise: 429s and 5xx, which come many at a time

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    # ---- answers -------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, protobuf: bool, **headers: str) -> None:
        """A google.rpc.Status, as protobuf or JSON to match what the client sent."""
        if status >= 500 or status == 429:
            self.floods.warn(status, "%s %s: %s", status, self.path, message)
        else:
            log.info("%s %s: %s", status, self.path, message)
        rpc = status_pb2.Status(code=_GRPC_CODES.get(status, code_pb2.UNKNOWN), message=message)
        if protobuf:
            self._send(status, rpc.SerializeToString(), "application/x-protobuf", **headers)
        else:
            body = json_format.MessageToJson(rpc, indent=None).encode()
            self._send(status, body, "application/json", **headers)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            # Here rather than at accept: a slow or plaintext client holds up only itself.
            try:
                self.connection.settimeout(HANDSHAKE_TIMEOUT)
                self.connection.do_handshake()
                self.connection.settimeout(self.timeout)
            except (ssl.SSLError, OSError) as exc:
                log.info("TLS handshake with %s failed: %s", self.address_string(), exc)
                return
        super().handle()

    def handle_one_request(self) -> None:
        """Waits up to `idle_timeout` for the request to begin, then reads it with
        `timeout`."""
        try:
            self.connection.settimeout(self.idle_timeout)
            begun = bool(self.rfile.peek(1))  # nothing: the client closed the connection
        except OSError:  # TimeoutError included: idle for too long
            begun = False
        if not begun:
            self.close_connection = True
            return
        self.connection.settimeout(self.timeout)
        super().handle_one_request()

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue` (curl sends it for bodies over 1 MB): a full queue or
        budget is answered 429 before the client is told to send its body, not after."""
        path = self.path.split("?", 1)[0]
        collector = self.collector
        ingest = path in OTLP_PATHS or path == LINES_PATH
        allowed = collector.token is None or self._authorised(collector.token)
        length = self.headers.get("Content-Length", "")
        # Else as without the header: a wrong path, a missing token, a missing or too large
        # length are answered as such once the body is sent. The budget is checked here,
        # without waiting (curl sends its body anyway after 1 s) and not held: it may be
        # taken meanwhile, and the body then wait for room once sent.
        sized = bool(_DIGITS.fullmatch(length)) and int(length) <= collector.max_body_bytes
        if self.command == "POST" and ingest and allowed and sized:
            try:
                collector.admit(int(length), wait=0.0).release()  # curl waits 1 s
            except QueueFull as exc:
                self.close_connection = True  # a body sent all the same is not read
                protobuf = media_type(self.headers.get("Content-Type")) in PROTOBUF_TYPES
                self._throttled(exc, protobuf)
                return False
        return super().handle_expect_100()

    # ---- requests ------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0]
        token = self.collector.token
        if path in PRIVATE_PATHS and token is not None and not self._authorised(token):
            self._error(401, "missing or wrong bearer token", protobuf=False)
        elif path in ("/healthz", "/stats"):
            health = self.collector.health()
            # A probe reads the code: 503 while the store cannot be written. /stats is 200.
            status = 503 if path == "/healthz" and health["status"] != "ok" else 200
            self._send(status, orjson.dumps(health), "application/json")
        elif path == "/metrics":
            self._send(200, self.metrics.page(), self.metrics.content_type)
        else:
            self._error(404, f"no such path {self.path}", protobuf=False)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except TimeoutError as exc:  # a body that did not arrive: its share is back
            log.info("%s %s: %s", self.address_string(), self.path, exc)
            self.close_connection = True
        except FramingError as exc:
            self.close_connection = True
            self.collector.bad_request()
            protobuf = media_type(self.headers.get("Content-Type")) in PROTOBUF_TYPES
            self._error(exc.status, str(exc), protobuf)
        except Exception as exc:  # the process stays up on any input
            log.exception("unexpected error on %s", self.path)
            self.close_connection = True
            try:
                self._error(500, f"internal error: {exc}", protobuf=False)
            except OSError:
                pass

    def _post(self) -> None:
        path = self.path.split("?", 1)[0]
        kind = OTLP_PATHS.get(path)
        ctype = media_type(self.headers.get("Content-Type"))
        protobuf = ctype in PROTOBUF_TYPES
        collector = self.collector
        size = body_length(self.headers)  # first: no answer can be given before it is known
        closing = self.close_connection
        if size == CHUNKED:
            # Until the body has been read to its end, no refusal can leave the
            # connection in a known place: it is closed after the answer.
            self.close_connection = True
        length = str(size) if size is not None and size != CHUNKED else None
        if kind is None and path != LINES_PATH:
            return self._refuse(404, f"no such path {path}", protobuf, length)
        if collector.token is not None and not self._authorised(collector.token):
            return self._refuse(401, "missing or wrong bearer token", protobuf, length)
        if size is None:
            return self._refuse(411, "Content-Length or chunked body required", protobuf, None)
        if size > collector.max_body_bytes:
            return self._refuse(
                413, f"body is larger than {collector.max_body_bytes} bytes", protobuf, length
            )
        if kind is not None and not (protobuf or ctype in JSON_TYPES):
            return self._refuse(415, f"unsupported Content-Type {ctype!r}", protobuf, length)
        if kind is None and ctype not in LINES_TYPES:
            return self._refuse(415, f"unsupported Content-Type {ctype!r}", False, length)
        try:
            # Before the body is read: while the queue is full, or the bodies being
            # received take the whole budget. A chunked body takes its share as it comes.
            admission = collector.admit(max(size, 0))
        except QueueFull as exc:
            self._drain(length)
            return self._throttled(exc, protobuf)
        try:
            with admission:
                decoded = self._decode(kind, path, protobuf, size, admission, closing)
                result = collector.commit(decoded, admission)
        except BodyError as exc:
            return self._refuse(exc.status, str(exc), protobuf, None)
        except QueueFull as exc:
            return self._throttled(exc, protobuf)
        except WriteFailed as exc:
            return self._error(
                503, f"not stored: {without_paths(str(exc))}", protobuf, Retry_After="5"
            )
        if kind is None:
            answer = {
                "accepted": result.accepted,
                "rejected": result.rejected,
                "error_message": result.message,
            }
            return self._send(200, orjson.dumps(answer), "application/json")
        response = otlp_response(kind, result)
        if protobuf:
            self._send(200, response.SerializeToString(), "application/x-protobuf")
        else:
            self._send(200, json_format.MessageToJson(response, indent=None).encode(),
                       "application/json")

    def _decode(
        self, kind: str | None, path: str, protobuf: bool, size: int, admission: Admission,
        closing: bool = False,
    ) -> DecodeResult:
        """The body read, unwrapped and decoded; only the rows outlive this call. As it
        is decompressed (or as its chunks arrive), its share of the budget grows with it,
        room permitting."""
        collector = self.collector
        if size == CHUNKED:
            raw = self._read_chunked(lambda total: collector.reserve(admission, total))
            self.close_connection = closing
        else:
            raw = self._read_body(size)
        body = unwrap(
            raw, self.headers.get("Content-Encoding"), collector.max_body_bytes,
            lambda size: collector.reserve(admission, size),
        )
        admission.shrink_to(max(len(body), len(raw)))
        del raw
        signal = kind or "lines"
        media = "ndjson" if kind is None else "protobuf" if protobuf else "json"
        return collector.decode(signal, media, body, f"http:{path}")

    def _read_body(self, size: int) -> bytearray:
        """The body, which must arrive within `body_timeout` seconds (TimeoutError, which
        closes the connection): a body trickled in has no longer to hold its share of the
        budget. Read into one buffer, which the decoders take as it is."""
        deadline = time.monotonic() + self.body_timeout
        body = bytearray(size)
        view = memoryview(body)
        got = 0
        try:
            while got < size:
                self._before(deadline)
                count = self.rfile.readinto1(view[got:])
                if not count:
                    break
                got += count
        finally:
            view.release()
            self.connection.settimeout(self.timeout)
        if got < size:  # the client closed: what came is not the body it announced
            self.close_connection = True
            raise BodyError(400, f"body ended after {got} of its {size} bytes")
        return body

    def _before(self, deadline: float) -> None:
        """Before a read of the body: TimeoutError once `deadline` has passed, and the
        next read may take no longer than what is left."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"body not received within {self.body_timeout}s")
        self.connection.settimeout(min(left, self.timeout or left))

    def _read_chunked(self, reserve: Any) -> bytearray:
        """A chunked body (RFC 9112 7.1), decoded, under the same limits as one with a
        Content-Length: `max_body_bytes` in all, `reserve(total)` asked before it grows
        to `total` bytes (the budget), all within `body_timeout` seconds. A refusal part
        way through leaves the connection to be closed (`_post` marked it so)."""
        deadline = time.monotonic() + self.body_timeout
        limit = self.collector.max_body_bytes
        body = bytearray()
        try:
            while True:
                self._before(deadline)
                line = self.rfile.readline(CHUNK_LINE_LIMIT + 1)
                match = _CHUNK_SIZE.fullmatch(line)
                if not match:
                    raise BodyError(400, self._chunk_fault(line, "chunk size line"))
                size = int(match.group(1), 16)
                if size == 0:
                    break
                if len(body) + size > limit:
                    raise BodyError(413, f"body is larger than {limit} bytes")
                reserve(len(body) + size)
                while size:
                    self._before(deadline)
                    data = self.rfile.read1(size)
                    if not data:
                        raise BodyError(400, "body ended inside a chunk")
                    body += data
                    size -= len(data)
                self._before(deadline)
                if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise BodyError(400, "chunk not followed by a line end")
            for _ in range(MAX_TRAILERS + 1):  # trailer fields, read past
                self._before(deadline)
                line = self.rfile.readline(CHUNK_LINE_LIMIT + 1)
                if line in (b"\r\n", b"\n"):
                    return body
                if not line.endswith(b"\n"):
                    raise BodyError(400, self._chunk_fault(line, "trailer line"))
            raise BodyError(400, f"more than {MAX_TRAILERS} trailer lines")
        finally:
            self.connection.settimeout(self.timeout)

    @staticmethod
    def _chunk_fault(line: bytes, what: str) -> str:
        if not line:
            return f"body ended before its {what}"
        if not line.endswith(b"\n"):
            return f"{what} too long or cut off"
        return f"invalid {what}: {line[:40]!r}"

    def _refuse(self, status: int, message: str, protobuf: bool, unread: str | None) -> None:
        """Answer an error. An unread body is drained (in small chunks, up to a cap) so
        that the client can read the answer; a larger one closes the connection."""
        if status != 401:
            self.collector.bad_request()
        self._drain(unread)
        self._error(status, message, protobuf)

    def _throttled(self, exc: QueueFull, protobuf: bool) -> None:
        """429, with the Retry-After the refusal named."""
        self._error(429, str(exc), protobuf, Retry_After=str(exc.retry_after))

    def _drain(self, unread: str | None) -> None:
        """Read an unread body of `unread` bytes away, in small chunks, or close the
        connection after the answer when it is over the cap."""
        if unread is not None and unread.isdigit() and int(unread) > 0:
            remaining = int(unread)
            if remaining <= DRAIN_LIMIT:
                while remaining > 0:
                    chunk = self.rfile.read(min(remaining, 1 << 16))
                    if not chunk:
                        break
                    remaining -= len(chunk)
            else:
                self.close_connection = True

    def _authorised(self, token: str) -> bool:
        return bearer_matches(self.headers.get("Authorization"), token)


class _Server(ThreadingHTTPServer):
    # The stdlib default backlog (5) resets connections when a few dozen exporters
    # reconnect at once; admission control, not the backlog, is what bounds the load.
    request_queue_size = 256
    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        if self.tls is not None:  # the handshake is the connection's thread's (Handler.handle)
            connection = self.tls.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address


class HttpReceiver:
    """The HTTP server on its own thread; `port` is the bound one (useful with port 0).
    With `tls`, it speaks HTTPS only. A connection that waits `idle_timeout` seconds for
    its next request is closed, and so is one whose request is silent for `read_timeout`
    seconds, or whose body takes over `body_timeout` seconds to arrive."""

    def __init__(
        self,
        collector: Collector,
        host: str = "127.0.0.1",
        port: int = 4318,
        tls: ssl.SSLContext | None = None,
        read_timeout: float = READ_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        handler = type(
            "BoundHandler", (Handler,),
            {"collector": collector, "metrics": CollectorMetrics(collector),
             "floods": SummarisedLog(log), "timeout": read_timeout,
             "body_timeout": body_timeout, "idle_timeout": idle_timeout},
        )
        self.server = _Server((host, port), handler)
        self.server.tls = tls
        self.host, self.port = self.server.server_address[:2]
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="dupescope-http", daemon=True
        )

    def start(self) -> HttpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
