"""The standard gRPC health service (`grpc.health.v1.Health/Check`) answers what
`/healthz` does: SERVING, NOT_SERVING while the store cannot be written, for the server
and each OTLP service, without the token probes cannot send."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest
from collect_support import FullDisk, SlowStore, job_spans, running, send_spans
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from store.embedded import EmbeddedStore

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
TRACES = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS = "opentelemetry.proto.collector.logs.v1.LogsService"


def _check(port: int, service: str = "", timeout: float = 10) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return answer.status


@pytest.mark.parametrize("service", ["", TRACES, LOGS])
def test_a_working_collector_is_serving(tmp_path: Path, service: str) -> None:
    with running(EmbeddedStore(tmp_path / "store")) as collector:
        assert send_spans(collector.http.port) == 200
        assert _check(collector.grpc.port, service) == SERVING


def test_a_failing_store_is_not_serving_until_a_write_succeeds(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "store")
    with running(store) as collector:
        assert send_spans(collector.http.port) == 503
        assert _check(collector.grpc.port) == NOT_SERVING
        assert _check(collector.grpc.port, TRACES) == NOT_SERVING
        store.full = False
        assert send_spans(collector.http.port) == 200
        assert _check(collector.grpc.port) == SERVING


def test_an_unknown_service_is_not_found(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store")) as collector:
        with pytest.raises(grpc.RpcError) as refused:
            _check(collector.grpc.port, "no.such.Service")
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_needs_no_token(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), token="s3cret") as collector:
        assert _check(collector.grpc.port) == SERVING


def test_health_is_answered_at_once_while_exports_wait_for_a_slow_store(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path / "store"), blocked=True)
    with running(store) as collector:
        port = collector.grpc.port

        def export() -> None:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = trace_service_pb2_grpc.TraceServiceStub(channel)
                stub.Export(encode_spans(job_spans(1)), timeout=30)

        waiting = [threading.Thread(target=export) for _ in range(12)]  # more than 8 threads
        for thread in waiting:
            thread.start()
        for _ in range(200):
            if collector.collector.health()["queue_batches"] >= 11:  # and one being written
                break
            threading.Event().wait(0.02)
        assert _check(port, timeout=1) == SERVING
        store.gate.set()
        for thread in waiting:
            thread.join(30)
