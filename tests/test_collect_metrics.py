"""`GET /metrics`: the collector's own counters as Prometheus text, parsed by Prometheus'
own client library, agreeing with what the store holds and with `/healthz`."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collect_support import get_json, job_spans, post, raw_count, running
from native_support import require_native
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from prometheus_client.parser import text_string_to_metric_families

from collectors.service.pipeline import Durations
from queries import derived
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore

PB = "application/x-protobuf"
WRITES = "dupescope_collector_write_seconds"


def _body(count: int = 3, offset: int = 0) -> bytes:
    return encode_spans(job_spans(count, offset=offset)).SerializeToString()


def _scrape(port: int) -> tuple[str, dict[str, float]]:
    """The page's content type, and each sample's value by name (and labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        content_type, text = answer.headers["Content-Type"], answer.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return content_type, values


def test_metrics_page_is_prometheus_text(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        content_type, values = _scrape(collector.http.port)
    assert content_type.startswith("text/plain; version=")
    assert values["dupescope_collector_received_rows_total"] == 0
    assert values["dupescope_collector_info{store=embedded}"] == 1  # its kind, not its path


def test_written_rows_are_the_rows_the_store_holds(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        assert post(f"http://127.0.0.1:{collector.http.port}/v1/traces", _body(), PB)[0] == 200
        _, values = _scrape(collector.http.port)
    assert values["dupescope_collector_written_rows_total"] == raw_count(store) == 12
    assert values["dupescope_collector_received_rows_total"] == 12
    assert values["dupescope_collector_rejected_records_total"] == 1
    assert values["dupescope_collector_ignored_spans_total"] == 1


def test_a_resent_batch_counts_as_deduplicated_rows(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        url, body = f"http://127.0.0.1:{collector.http.port}/v1/traces", _body()
        for _ in range(2):
            assert post(url, body, PB)[0] == 200
        _, values = _scrape(collector.http.port)
    assert values["dupescope_collector_deduplicated_rows_total"] == 12
    assert values["dupescope_collector_written_rows_total"] == 12


def test_a_bad_request_is_counted(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        assert post(f"http://127.0.0.1:{collector.http.port}/v1/traces", b"\xff", PB)[0] == 400
        _, values = _scrape(collector.http.port)
    assert values["dupescope_collector_bad_requests_total"] == 1


def test_each_group_commit_is_counted_in_the_write_histogram(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        base = f"http://127.0.0.1:{collector.http.port}"
        for batch in range(3):  # one at a time: one group commit each
            assert post(base + "/v1/traces", _body(offset=10 * batch), PB)[0] == 200
        _, values = _scrape(collector.http.port)
        health = get_json(base + "/healthz")
    assert values[f"{WRITES}_count"] == health["writes"] == 3
    assert values[f"{WRITES}_sum"] > 0
    buckets = [v for k, v in values.items() if k.startswith(f"{WRITES}_bucket")]
    assert buckets == sorted(buckets) and buckets[-1] == 3  # cumulative, +Inf last


def test_metrics_show_the_uid_memory_and_how_far_back_it_reaches(tmp_path: Path) -> None:
    require_native("_uid_memory")  # the window is the native memory's generations
    started = time.monotonic()
    with running(EmbeddedStore(tmp_path / "store"), recent_uids=1000) as collector:
        _, values = _scrape(collector.http.port)
    lived = time.monotonic() - started
    assert values["dupescope_collector_recent_uids"] == 1000
    # The memory reaches back no further than the collector has lived.
    assert 0 <= values["dupescope_collector_dedupe_window_seconds"] <= lived


def test_metrics_show_the_bodies_held_against_their_budget(tmp_path: Path) -> None:
    budget = {"body_budget_bytes": 1 << 25, "max_body_bytes": 1 << 20}
    with running(EmbeddedStore(tmp_path / "store"), **budget) as collector:
        held = collector.collector.admit(5000)
        _, values = _scrape(collector.http.port)
        held.release()
    assert values["dupescope_collector_bodies_held_bytes"] == 5000
    assert values["dupescope_collector_body_budget_bytes"] == 1 << 25


def test_a_commit_counts_in_the_first_bucket_at_or_above_its_duration() -> None:
    durations = Durations(bounds=(0.001, 0.01))
    for seconds in (0.001, 0.0011, 0.5):
        durations.add(seconds)
    assert durations.counts == [1, 1, 1]
    assert durations.total_seconds == 0.5021


def _lag_follows_derivation(collector: Any, derive: Callable[[], None]) -> None:
    """-1 before anything is derived, 0 once a reader has derived everything, and the
    wait of the oldest rows not derived in between."""
    lag = "dupescope_collector_derivation_lag_seconds"
    url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
    assert _scrape(collector.http.port)[1][lag] == -1  # no reader derived anything yet
    assert post(url, _body(), PB)[0] == 200
    derive()
    assert _scrape(collector.http.port)[1][lag] == 0
    assert post(url, _body(offset=3), PB)[0] == 200
    time.sleep(1.2)
    waited = _scrape(collector.http.port)[1][lag]
    assert 1.0 <= waited < 30
    derive()
    assert _scrape(collector.http.port)[1][lag] == 0


def test_derivation_lag_counts_from_the_first_write_no_reader_derived(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        reader = EmbeddedStore(tmp_path / "store")
        _lag_follows_derivation(collector, lambda: derived.ensure(reader))
        reader.close()


def test_derivation_lag_on_chdb_counts_from_the_oldest_row_not_derived(tmp_path: Path) -> None:
    store = ChdbStore(str(tmp_path / "chdb"))
    try:
        with running(store) as collector:
            _lag_follows_derivation(collector, lambda: derived.ensure(store))
    finally:
        store.close()


def test_metrics_carry_the_figures_of_status(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, compact_every=0) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        body = b'{"ts": 1764504000, "event": "deliver", "job_id": "j1", "job_type": "t"}\n'
        assert post(url, body, "application/x-ndjson")[0] == 200
        _, values = _scrape(collector.http.port)
    assert values["dupescope_collector_store_events"] == 1
    assert values["dupescope_collector_store_segments_awaiting_compaction{day=2025-11-30}"] == 1
    assert values["dupescope_collector_store_disk_bytes{part=events}"] > 0
    assert values["dupescope_collector_memory_budget_bytes"] > 0
