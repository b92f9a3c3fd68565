"""Helpers for the collector tests: job spans and logs from the real OpenTelemetry SDK,
a collector running in a thread or a subprocess, and small HTTP calls."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors.service.run import CollectConfig, RunningCollector
from store.base import Store
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
RESOURCE = Resource.create(
    {"service.name": "billing-worker", "host.name": "w1", "process.pid": 4242,
     "service.version": "1.2.3"}
)
T0 = 1_760_000_000_000_000_000


def job_spans(count: int, *, offset: int = 0) -> list[Any]:
    """Finished SDK spans: execution spans with lifecycle span events, child step spans,
    one span that is no job event, and one deliver without a job_id (rejected)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("dupescope.tests")
    for i in range(offset, offset + count):
        start = T0 + i * 1_000_000_000
        attrs = {
            "messaging.message.id": f"msg-{i}",
            "messaging.destination.name": "invoices",
            "messaging.operation.type": "process",
            "job.job_type": "create_invoice",
            "job.idempotency_key": f"order-{i // 2}",
            "job.delivery_attempt": 1 + i % 2,
            "job.visibility_timeout_ms": 30_000,
            "tenant": "acme",
        }
        with tracer.start_as_current_span("process invoice", attributes=attrs,
                                          start_time=start, end_on_exit=False) as span:
            span.add_event("lock_acquire", {"lock_key": f"lock:order-{i // 2}",
                                            "lock_owner": f"w1-{i}", "lock_ttl_ms": 10_000},
                           timestamp=start + 1_000_000)
            child = tracer.start_span("side_effect", start_time=start + 2_000_000,
                                      attributes={"job.job_id": f"msg-{i}",
                                                  "job.job_type": "create_invoice"})
            child.end(end_time=start + 3_000_000)
            span.add_event("ack", timestamp=start + 4_000_000)
            span.end(end_time=start + 5_000_000)
    with tracer.start_as_current_span("GET /health", start_time=T0, end_on_exit=False) as span:
        span.end(end_time=T0 + 1000)
    with tracer.start_as_current_span("deliver", start_time=T0, end_on_exit=False) as span:
        span.end(end_time=T0 + 1000)  # a deliver with no job_id: rejected, named in the answer
    provider.shutdown()
    return list(exporter.get_finished_spans())


def job_logs(count: int) -> list[Any]:
    """Finished SDK log records, one lifecycle event each (structured bodies)."""
    from opentelemetry._logs import LogRecord

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("dupescope.tests")
    for i in range(count):
        logger.emit(LogRecord(
            timestamp=T0 + i * 1_000_000,
            body={"event": "enqueue", "job_id": f"log-{i}", "job_type": "send_mail"},
            attributes={"queue": "mail"},
        ))
    provider.shutdown()
    return list(exporter.get_finished_logs())


def _hex_ids(node: Any) -> Any:
    """protobuf's JSON mapping writes ids as base64; OTLP/JSON writes them as hex."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v
            else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def otlp_json_line(spans: list[Any] | None = None, logs: list[Any] | None = None) -> bytes:
    """The same telemetry as one OTLP JSON Lines line (what a file exporter writes)."""
    message = encode_spans(spans) if spans is not None else encode_logs(logs)
    return orjson.dumps(_hex_ids(json_format.MessageToDict(message)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running(store: Store, **options: Any) -> Iterator[RunningCollector]:
    """A collector in this process, on free ports."""
    config = CollectConfig(**{"http_port": 0, "grpc_port": 0, **options})
    collector = RunningCollector(store, config)
    try:
        yield collector
    finally:
        collector.stop()


def post(url: str, body: bytes, content_type: str, **headers: str) -> tuple[int, dict, bytes]:
    """POST and return (status, headers, body) whatever the status."""
    sent = {"Content-Type": content_type, **{k.replace("_", "-"): v for k, v in headers.items()}}
    request = urllib.request.Request(url, data=body, headers=sent, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def post_head(length: int, expect: bool = False) -> bytes:
    """The head of a raw `POST /v1/traces` of protobuf announcing `length` bytes of body,
    with `Expect: 100-continue` if asked."""
    return (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf"
        + b"\r\nContent-Length: " + str(length).encode()
        + (b"\r\nExpect: 100-continue" if expect else b"") + b"\r\n\r\n"
    )


def expect_100(port: int, body: bytes) -> list[bytes]:
    """POST with `Expect: 100-continue`, sending the body only if told to; the status
    codes answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answers = sock.makefile("rb")
        sock.sendall(post_head(len(body), expect=True))
        codes = [answers.readline().split()[1]]
        if codes[0] == b"100":
            answers.readline()  # the blank line ending the interim answer
            sock.sendall(body)
            codes.append(answers.readline().split()[1])
    return codes


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return orjson.loads(answer.read())


class Subprocess:
    """`dupescope collect` as a real process (for SIGKILL and restart tests)."""

    def __init__(self, store: Path, *args: str) -> None:
        self.http_port = free_port()
        command = [
            sys.executable, "-c", "from dupescope.cli import main; main()", "collect",
            "--store", str(store), "--http-port", str(self.http_port), "--grpc-port", "-1",
            "--log-level", "WARNING", *args,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.http_port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                get_json(self.url + "/healthz")
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(self.process.stderr.read().decode()) from None
                time.sleep(0.1)
        raise RuntimeError("collector did not start")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


def rows(store: Store, exclude: tuple[str, ...] = ("source",)) -> pa.Table:
    """All stored rows, repeats collapsed as readers do, in a stable order."""
    table = store.arrow(
        "SELECT * FROM events QUALIFY row_number() OVER (PARTITION BY event_uid) = 1 "
        "ORDER BY event_uid"
    ) if store.dialect == "duckdb" else store.arrow(
        "SELECT * FROM events ORDER BY event_uid LIMIT 1 BY event_uid"
    )
    return table.drop_columns([c for c in exclude if c in table.column_names])


def raw_count(store: Store) -> int:
    return int(store.execute("SELECT count(*) AS n FROM events")["n"][0])


def append(path: Path, data: bytes) -> None:
    """Add to a file the way a logging process does (a tailed file growing)."""
    with open(path, "ab") as handle:
        handle.write(data)


def wait_for_rows(store: Store, rows: int, timeout: float = 15.0) -> None:
    """Until the store holds at least `rows` rows, repeats counted (a tailer is behind)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if raw_count(store) >= rows:
            return
        time.sleep(0.1)
    raise AssertionError(f"expected {rows} rows, have {raw_count(store)}")


class SlowStore:
    """Wraps a store: each write takes `delay` seconds, and waits while `gate` is clear."""

    def __init__(self, inner: Store, delay: float = 0.0, blocked: bool = False) -> None:
        self.inner = inner
        self.dialect = inner.dialect
        self.gate = threading.Event()
        self.delay = delay
        if not blocked:
            self.gate.set()

    def write(self, table: pa.Table) -> int:
        if self.delay:
            time.sleep(self.delay)
        self.gate.wait(30)
        return self.inner.write(table)

    def execute(self, sql: str, params: dict | None = None) -> Any:
        return self.inner.execute(sql, params)

    def arrow(self, sql: str, params: dict | None = None) -> pa.Table:
        return self.inner.arrow(sql, params)

    def command(self, sql: str, params: dict | None = None) -> None:
        self.inner.command(sql, params)

    def snapshot_id(self) -> str | None:
        return self.inner.snapshot_id()

    def key_rows(self, key: str) -> pa.Table | None:
        return self.inner.key_rows(key)

    def segmented(self) -> None:
        """None: a collector writes through `write` (where the delay is), not hot logs."""
        return None

    def describe(self) -> str:
        return "slow " + self.inner.describe()

    def close(self) -> None:
        self.inner.close()


def source_digest(module: Any, source: str) -> str:
    """What setup.py builds into a native module: the sha256 (16 hex digits) of the C
    source in the module's folder."""
    return hashlib.sha256((Path(module.__file__).parent / source).read_bytes()).hexdigest()[:16]


class FullDisk(EmbeddedStore):
    """An embedded store whose collector writes fail while `full` is set, each after
    `delay` seconds."""

    full = True
    delay = 0.0

    def write_hot(self, table: pa.Table) -> int:
        time.sleep(self.delay)
        if self.full:
            raise OSError("No space left on device")
        return super().write_hot(table)


def send_spans(port: int, count: int = 2) -> int:
    """POST `count` job spans as OTLP protobuf; the answer's status."""
    body = encode_spans(job_spans(count)).SerializeToString()
    return post(f"http://127.0.0.1:{port}/v1/traces", body, "application/x-protobuf")[0]
