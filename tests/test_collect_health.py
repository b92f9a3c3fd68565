"""`/healthz` as a probe reads it: 503, naming the error, while the store cannot be
written, and 200 again once a write succeeds; `/stats` and `/metrics` keep answering."""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from collect_support import FullDisk, SlowStore, job_spans, post, running, send_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from store.embedded import EmbeddedStore

PB = "application/x-protobuf"


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_healthz_answers_503_naming_the_error_while_writes_fail(tmp_path: Path) -> None:
    with running(FullDisk(tmp_path / "store")) as collector:
        assert send_spans(collector.http.port) == 503
        status, body = _get(f"http://127.0.0.1:{collector.http.port}/healthz")
    health = orjson.loads(body)
    assert status == 503
    assert health["status"] == "failing"
    assert "No space left on device" in health["last_error"]
    assert health["failing_since"] > 0


def test_a_write_that_succeeds_makes_healthz_ok_again(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "store")
    with running(store) as collector:
        assert send_spans(collector.http.port) == 503
        store.full = False
        assert send_spans(collector.http.port) == 200
        status, body = _get(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert status == 200
    assert orjson.loads(body)["last_error"] is None


def test_stats_answers_200_while_writes_fail(tmp_path: Path) -> None:
    with running(FullDisk(tmp_path / "store")) as collector:
        send_spans(collector.http.port)
        status, body = _get(f"http://127.0.0.1:{collector.http.port}/stats")
    assert status == 200
    assert orjson.loads(body)["write_errors"] == 1


def test_metrics_show_the_store_failing(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "store")
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/metrics"
        assert b"dupescope_collector_store_failing 0.0" in _get(url)[1]
        send_spans(collector.http.port)
        assert b"dupescope_collector_store_failing 1.0" in _get(url)[1]


def test_a_resend_of_stored_rows_does_not_make_a_failing_store_ok(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "store")
    store.full = False
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        stored = encode_spans(job_spans(2)).SerializeToString()
        assert post(url, stored, PB)[0] == 200
        store.full = True
        assert send_spans(collector.http.port) == 503
        assert post(url, stored, PB)[0] == 200  # all repeats: nothing reaches the store
        status, body = _get(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert status == 503
    assert orjson.loads(body)["writes"] == 1


def test_a_failure_with_no_later_try_stops_counting_after_the_hold(tmp_path: Path) -> None:
    with running(FullDisk(tmp_path / "store")) as collector:
        collector.collector.pipeline.failure_hold = 0.3
        assert send_spans(collector.http.port) == 503
        url = f"http://127.0.0.1:{collector.http.port}/healthz"
        assert _get(url)[0] == 503
        time.sleep(0.4)  # no batch since: a readiness probe lets traffic try again
        status, body = _get(url)
    assert status == 200
    assert orjson.loads(body)["status"] == "ok"


def test_the_recovery_is_logged_with_how_many_writes_failed(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="dupescope.collect")
    store = FullDisk(tmp_path / "store")
    with running(store) as collector:
        for _ in range(2):
            assert send_spans(collector.http.port) == 503
        store.full = False
        assert send_spans(collector.http.port) == 200
    recovered = [r.getMessage() for r in caplog.records if "succeed again" in r.getMessage()]
    assert len(recovered) == 1 and "after 2 failed since" in recovered[0]


def test_a_later_failure_restarts_the_hold(tmp_path: Path) -> None:
    with running(FullDisk(tmp_path / "store")) as collector:
        collector.collector.pipeline.failure_hold = 1.0
        assert send_spans(collector.http.port) == 503
        time.sleep(0.6)
        assert send_spans(collector.http.port) == 503
        time.sleep(0.6)  # 1.2 s after the first failure, 0.6 s after the latest
        status = _get(f"http://127.0.0.1:{collector.http.port}/healthz")[0]
    assert status == 503


def test_a_failure_stays_reported_while_another_write_is_under_way(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "store")
    with running(store) as collector:
        collector.collector.pipeline.failure_hold = 0.2
        assert send_spans(collector.http.port) == 503
        store.delay = 1.0  # the next write takes a second to fail
        sender = threading.Thread(target=send_spans, args=(collector.http.port,))
        sender.start()
        time.sleep(0.5)  # past the hold, with that write under way
        status = _get(f"http://127.0.0.1:{collector.http.port}/healthz")[0]
        sender.join()
    assert status == 503


def test_a_write_that_runs_too_long_is_reported_as_failing(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path / "store"), blocked=True)
    with running(store) as collector:
        collector.collector.pipeline.stuck_after = 0.2
        sender = threading.Thread(target=send_spans, args=(collector.http.port,))
        sender.start()
        time.sleep(0.5)
        status, body = _get(f"http://127.0.0.1:{collector.http.port}/healthz")
        store.gate.set()
        sender.join()
    assert status == 503
    assert "a store write has run for" in orjson.loads(body)["last_error"]
