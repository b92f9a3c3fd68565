"""The body budget: the bytes of request bodies held outside the queue, from before one is
read until its rows are queued, are bounded, and a sender beyond the bound gets 429 /
RESOURCE_EXHAUSTED before its body is read. Bodies are decoded on the collector's own
decoding threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
from collect_support import (
    SlowStore,
    Subprocess,
    get_json,
    job_spans,
    post,
    raw_count,
    running,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from collectors.service.collector import BodyBudget, Collector
from collectors.service.pipeline import QueueFull
from store.embedded import EmbeddedStore

PB = "application/x-protobuf"
LINE = b'{"ts": "2025-01-01T00:00:00Z", "event": "deliver", "job_id": "j1"}\n'


def _body(count: int = 2) -> bytes:
    return encode_spans(job_spans(count)).SerializeToString()


def _wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_budget_takes_bodies_until_the_next_would_go_over_it() -> None:
    budget = BodyBudget(100)
    assert budget.take(60) and budget.take(40)
    assert not budget.take(1)
    budget.give(40)
    assert budget.take(30) and budget.held == 90


def test_a_body_larger_than_the_budget_is_taken_only_when_nothing_else_is_held() -> None:
    budget = BodyBudget(100)
    assert budget.take(10)
    assert not budget.take(500)
    budget.give(10)
    assert budget.take(500)


def test_a_body_over_the_budget_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), body_budget_bytes=4096) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        held = collector.collector.admit(4096)  # another body, being received
        # Not gzip at all: read and unwrapped, it would be a 400.
        status, headers, _ = post(url, b"plain bytes", PB, Content_Encoding="gzip")
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
        held.release()
    assert status == 429 and headers.get("Retry-After") == "1"
    assert (health["throttled"], health["bad_requests"]) == (1, 0)
    assert (health["bodies_held_bytes"], health["body_budget_bytes"]) == (4096, 4096)


def test_a_body_is_taken_again_once_the_budget_has_room(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, body_budget_bytes=1 << 20) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        held = collector.collector.admit(1 << 20)
        refused = post(url, _body(), PB)[0]
        held.release()
        taken = post(url, _body(), PB)[0]
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert (refused, taken) == (429, 200)
    assert health["bodies_held_bytes"] == 0
    assert raw_count(store) == 8


def test_a_body_larger_than_the_whole_budget_is_taken(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    body = _body()
    assert len(body) > 1024
    with running(store, body_budget_bytes=1024) as collector:
        status = post(f"http://127.0.0.1:{collector.http.port}/v1/traces", body, PB)[0]
    assert status == 200 and raw_count(store) == 8


def test_a_grpc_export_over_the_budget_is_resource_exhausted(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), body_budget_bytes=4096) as collector:
        held = collector.collector.admit(4096)
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode_spans(job_spans(1)), timeout=10)
        held.release()
        channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_body_counts_against_the_budget_until_its_rows_are_queued(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path), body_budget=1 << 20)
    pipeline = collector.pipeline
    with pipeline._claims:  # the rows, decoded, wait for their turn to claim their uids
        sender = threading.Thread(target=collector.jsonlines, args=(LINE, "test"))
        sender.start()
        decoded = _wait_for(lambda: pipeline.snapshot()["received"] == 1)
        held_while_waiting = collector.bodies.held
    sender.join(30)
    collector.close()
    assert decoded and held_while_waiting == len(LINE)
    assert collector.bodies.held == 0


def test_a_batch_refused_once_decoded_gives_its_share_of_the_budget_back(
    tmp_path: Path,
) -> None:
    store = SlowStore(EmbeddedStore(tmp_path), blocked=True)
    collector = Collector(store, queue_rows=2)
    first = threading.Thread(target=collector.jsonlines, args=(LINE, "test"))
    first.start()  # 1 row of 2, until the store, blocked, has written it
    assert _wait_for(lambda: collector.pipeline.depth == 1)
    two_rows = LINE.replace(b"j1", b"j2") + LINE.replace(b"j1", b"j3")
    with pytest.raises(QueueFull):  # admitted (1 < 2), refused once decoded (1 + 2 > 2)
        collector.jsonlines(two_rows, "test")
    held = collector.bodies.held
    store.gate.set()
    first.join(30)
    collector.close()
    assert held == 0


def test_bodies_are_decoded_on_the_decoding_threads(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    name = collector._decode(lambda: threading.current_thread().name)
    collector.close()
    assert name.startswith("dupescope-decode")


def test_collect_takes_the_budget_from_its_option(tmp_path: Path) -> None:
    collector = Subprocess(tmp_path / "store", "--body-budget-bytes", "123456")
    try:
        health = get_json(collector.url + "/healthz")
    finally:
        collector.stop()
    assert health["body_budget_bytes"] == 123456
