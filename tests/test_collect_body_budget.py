"""The body budget: the bytes of request bodies held outside the queue, from before one is
read until its rows are queued, are bounded; an HTTP sender beyond the bound gets 429
before its body is read, a gRPC one RESOURCE_EXHAUSTED. Bodies are decoded on the
collector's own decoding threads."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from collect_support import (
    SlowStore,
    Subprocess,
    expect_100,
    get_json,
    job_spans,
    post,
    post_head,
    running,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from collectors.service.bodies import unwrap
from collectors.service.collector import Admission, BodyBudget, Collector
from collectors.service.pipeline import QueueFull, WriteFailed
from store.embedded import EmbeddedStore

PB = "application/x-protobuf"
# A budget of one body of the largest size, the least it can be.
SMALL = {"body_budget_bytes": 1 << 20, "max_body_bytes": 1 << 20}
LINE = b'{"ts": "2025-01-01T00:00:00Z", "event": "deliver", "job_id": "j1"}\n'


def _body(count: int = 2) -> bytes:
    return encode_spans(job_spans(count)).SerializeToString()


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def _health(collector) -> dict:  # type: ignore[no-untyped-def]
    return get_json(f"http://127.0.0.1:{collector.http.port}/healthz")


# ---- the budget ------------------------------------------------------------------------


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


def test_a_body_waiting_for_room_is_taken_as_soon_as_room_is_given_back() -> None:
    budget = BodyBudget(100)
    assert budget.take(100)
    threading.Timer(0.1, budget.give, args=(100,)).start()
    started = time.monotonic()
    assert budget.take(50, wait=10)
    assert time.monotonic() - started < 5  # woken, not timed out


def test_a_body_that_finds_no_room_within_its_wait_is_not_taken() -> None:
    budget = BodyBudget(100)
    assert budget.take(100)
    assert not budget.take(50, wait=0.05)
    assert budget.held == 100


def _waiting_in_a_thread(budget: BodyBudget, nbytes: int, wait: float) -> list[bool]:
    """Starts `budget.take(nbytes, wait)` on a thread; its answer lands in the list."""
    answer: list[bool] = []
    before = budget.waiting
    threading.Thread(target=lambda: answer.append(budget.take(nbytes, wait=wait))).start()
    assert _wait_for(lambda: budget.waiting > before)
    return answer


def test_a_body_that_fits_waits_behind_an_earlier_one_that_does_not() -> None:
    budget = BodyBudget(100)
    assert budget.take(50)
    first = _waiting_in_a_thread(budget, 80, wait=10)
    assert not budget.take(30, wait=0.2)  # fits, but 80 came first
    budget.give(50)
    assert _wait_for(lambda: first == [True]) and budget.held == 80


def test_a_body_that_stops_waiting_lets_the_next_in_line_go() -> None:
    budget = BodyBudget(100)
    assert budget.take(50)
    first = _waiting_in_a_thread(budget, 80, wait=0.3)
    second = _waiting_in_a_thread(budget, 30, wait=10)
    assert _wait_for(lambda: first == [False] and second == [True])
    assert budget.held == 80


def test_a_held_body_that_grows_does_not_wait_behind_new_ones() -> None:
    budget = BodyBudget(100)
    assert budget.take(50)
    admission = Admission(budget, 50)  # a body admitted, then decompressed
    _waiting_in_a_thread(budget, 80, wait=10)
    assert admission.grow_to(70, wait=0.2)  # a body being decompressed goes on
    assert budget.held == 70
    admission.release()


def test_the_budget_is_at_least_one_body_of_the_largest_size(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path), max_body_bytes=1 << 20, body_budget=1024)
    collector.close()
    assert collector.bodies.limit == 1 << 20


def test_a_body_inflated_in_steps_comes_out_whole() -> None:
    data = bytes(range(256)) * 12_000  # 3 MB: three steps and a bit
    assert unwrap(gzip.compress(data), "gzip", 16 << 20, lambda size: None) == data


def test_each_step_of_inflating_a_body_is_reserved_before_it_is_taken() -> None:
    data = bytes(range(256)) * 12_000
    asked: list[int] = []
    unwrap(gzip.compress(data), "gzip", 16 << 20, asked.append)
    assert asked == [1 << 20, 2 << 20, 3 << 20]  # each before the next MB comes out


# ---- HTTP ------------------------------------------------------------------------------


def test_a_body_over_the_budget_is_answered_429_before_it_is_read(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        held = collector.collector.admit(SMALL["body_budget_bytes"])  # another body, being received
        # Not gzip at all: read and unwrapped, it would be a 400.
        status, headers, _ = post(url, b"plain bytes", PB, Content_Encoding="gzip")
        held.release()
    assert (status, headers.get("Retry-After")) == (429, "1")


def test_a_refusal_for_the_budget_counts_as_throttled(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        post(f"http://127.0.0.1:{collector.http.port}/v1/traces", _body(), PB)
        health = _health(collector)
        held.release()
    assert (health["throttled"], health["bad_requests"]) == (1, 0)


def test_healthz_shows_the_bodies_held_against_the_budget(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        health = _health(collector)
        held.release()
    assert (health["bodies_held_bytes"], health["body_budget_bytes"]) == (1 << 20, 1 << 20)


def test_a_sender_waits_for_room_in_the_budget_rather_than_being_refused(
    tmp_path: Path,
) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        budget = collector.collector.bodies
        held = collector.collector.admit(SMALL["body_budget_bytes"])

        def release_once_waited_for() -> None:
            _wait_for(lambda: bool(budget._room._waiters))
            held.release()

        threading.Thread(target=release_once_waited_for).start()
        status = post(f"http://127.0.0.1:{collector.http.port}/v1/traces", _body(), PB)[0]
    assert status == 200


def test_a_body_is_taken_again_once_the_budget_has_room(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, **SMALL) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        refused = post(url, _body(), PB)[0]
        held.release()
        taken = post(url, _body(), PB)[0]
    assert (refused, taken) == (429, 200)


def test_a_compressed_body_holds_its_decompressed_size(tmp_path: Path) -> None:
    lines = b"".join(LINE.replace(b"j1", f"j{i}".encode()) for i in range(200))
    packed = gzip.compress(lines)
    with running(EmbeddedStore(tmp_path / "store")) as collector:
        pipeline = collector.collector.pipeline
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        with pipeline._claims:  # the rows, decoded, wait for their turn to claim their uids
            sender = threading.Thread(target=post, args=(url, packed, "application/x-ndjson"),
                                      kwargs={"Content_Encoding": "gzip"})
            sender.start()
            decoded = _wait_for(lambda: pipeline.snapshot()["received"] == 200)
            held = collector.collector.bodies.held
        sender.join(30)
    assert decoded and held == len(lines) > len(packed)


def test_a_compressed_body_without_room_to_decompress_is_answered_429(
    tmp_path: Path,
) -> None:
    packed = gzip.compress(b"x" * 500_000)  # ~1 KB that would hold 500 KB once inflated
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"] - (64 << 10))
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        status = post(url, packed, "application/x-ndjson", Content_Encoding="gzip")[0]
        left = collector.collector.bodies.held
        held.release()
    assert status == 429 and left == SMALL["body_budget_bytes"] - (64 << 10)


def test_a_stalled_body_gives_its_share_back_when_its_connection_times_out(
    tmp_path: Path,
) -> None:
    options = {**SMALL, "http_read_timeout": 2.0}
    with running(EmbeddedStore(tmp_path / "store"), **options) as collector:
        budget = collector.collector.bodies
        with socket.create_connection(("127.0.0.1", collector.http.port), timeout=10) as sock:
            sock.sendall(post_head(4096))  # and no body
            assert _wait_for(lambda: budget.held == 4096)
            assert _wait_for(lambda: budget.held == 0, seconds=10)
            closed = sock.recv(1) == b""
    assert closed


def test_a_trickled_body_gives_its_share_back_when_its_time_is_up(tmp_path: Path) -> None:
    options = {**SMALL, "http_read_timeout": 30.0, "http_body_timeout": 1.0}
    with running(EmbeddedStore(tmp_path / "store"), **options) as collector:
        budget = collector.collector.bodies
        with socket.create_connection(("127.0.0.1", collector.http.port), timeout=10) as sock:
            sock.sendall(post_head(4096))
            assert _wait_for(lambda: budget.held == 4096)
            given_back = False
            for _ in range(100):  # a byte every 0.1 s: never silent for the 30 s read timeout
                try:
                    sock.sendall(b"x")
                except OSError:
                    break
                if budget.held == 0:
                    given_back = True
                    break
                time.sleep(0.1)
    assert given_back


def test_a_body_over_the_budget_is_answered_429_instead_of_100_continue(
    tmp_path: Path,
) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        codes = expect_100(collector.http.port, bytes(4096))
        held.release()
    assert codes == [b"429"]


def test_a_body_over_the_size_limit_is_told_to_continue_then_answered_413(
    tmp_path: Path,
) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        # 413, not 429: a retry cannot help
        codes = expect_100(collector.http.port, bytes(SMALL["max_body_bytes"] + 1))
        held.release()
    assert codes == [b"100", b"413"]


# ---- gRPC, tails, and what holds the budget --------------------------------------------


def test_a_grpc_export_over_the_budget_is_resource_exhausted(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode_spans(job_spans(1)), timeout=10)
        held.release()
        channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_grpc_export_is_refused_at_once_rather_than_held_while_it_waits(
    tmp_path: Path,
) -> None:
    with running(EmbeddedStore(tmp_path / "store"), **SMALL) as collector:
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(encode_spans(job_spans(0)), timeout=10)  # connected: time only the refusal
        held = collector.collector.admit(SMALL["body_budget_bytes"])
        started = time.monotonic()
        with pytest.raises(grpc.RpcError):
            stub.Export(encode_spans(job_spans(1)), timeout=10)
        elapsed = time.monotonic() - started
        held.release()
        channel.close()
    assert elapsed < 0.9  # a body that waited would have waited 1 s


def test_a_tailed_chunk_is_taken_while_senders_hold_the_whole_budget(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path), max_body_bytes=4096, body_budget=4096)
    held = collector.admit(4096)
    result = collector.jsonlines(LINE, "tail:test")
    held.release()
    collector.close()
    assert result.accepted == 1


def test_a_body_holds_its_share_while_its_rows_wait_to_be_queued(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    body = _body()
    pipeline = collector.pipeline
    with pipeline._claims:  # the rows, decoded, wait for their turn to claim their uids
        sender = threading.Thread(target=collector.otlp, args=("traces", body, "protobuf", "t"))
        sender.start()
        decoded = _wait_for(lambda: pipeline.snapshot()["received"] == 8)
        held = collector.bodies.held
    sender.join(30)
    collector.close()
    assert decoded and held == len(body)


def test_a_body_gives_its_share_back_once_its_rows_are_queued(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path), blocked=True)
    collector = Collector(store)
    sender = threading.Thread(target=collector.otlp, args=("traces", _body(), "protobuf", "t"))
    sender.start()  # queued, then waiting for a write the store does not finish
    assert _wait_for(lambda: collector.pipeline.depth == 8)
    given_back = _wait_for(lambda: collector.bodies.held == 0)
    waiting = sender.is_alive()  # its rows are not durable yet
    store.gate.set()
    sender.join(30)
    collector.close()
    assert given_back and waiting


def test_a_batch_refused_once_decoded_gives_its_share_back(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path), blocked=True)
    collector = Collector(store, queue_rows=11)
    first = threading.Thread(target=collector.otlp, args=("traces", _body(1), "protobuf", "t"))
    first.start()  # 4 rows of 11, until the store, blocked, has written them
    assert _wait_for(lambda: collector.pipeline.depth == 4)
    with pytest.raises(QueueFull):  # admitted (4 < 11), refused once decoded (4 + 8 > 11)
        collector.otlp("traces", _body(2), "protobuf", "t")
    held = collector.bodies.held
    store.gate.set()
    first.join(30)
    collector.close()
    assert held == 0


def test_a_body_sent_as_the_collector_shuts_down_is_not_stored(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    collector.close()
    with pytest.raises(WriteFailed):
        collector.otlp("traces", _body(), "protobuf", "t")


def test_a_body_sent_as_a_collector_with_decode_workers_shuts_down_is_not_stored(
    tmp_path: Path,
) -> None:
    collector = Collector(EmbeddedStore(tmp_path), decode_workers=1)
    collector.close()
    with pytest.raises(WriteFailed):
        collector.otlp("traces", _body(), "protobuf", "t")


def test_a_body_is_decoded_on_the_thread_that_received_it(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    decoded_on: list[threading.Thread] = []
    receiver = threading.Thread(
        target=lambda: decoded_on.append(collector._decode(threading.current_thread))
    )
    receiver.start()
    receiver.join(30)
    collector.close()
    assert decoded_on == [receiver]


def test_collect_takes_the_budget_from_its_option(tmp_path: Path) -> None:
    collector = Subprocess(tmp_path / "store", "--body-budget-bytes", "123456789")
    try:
        health = get_json(collector.url + "/healthz")
    finally:
        collector.stop()
    assert health["body_budget_bytes"] == 123456789
