"""Real OpenTelemetry exporters against a running collector: the rows stored equal those of
ingesting the same telemetry from an OTLP JSON Lines file, and resending changes nothing."""

from __future__ import annotations

from pathlib import Path

import grpc
import orjson
import pytest
from collect_support import (
    SlowStore,
    get_json,
    job_logs,
    job_spans,
    otlp_json_line,
    raw_count,
    rows,
    running,
)
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from collectors.files import ingest_files
from store.embedded import EmbeddedStore


def _from_file(tmp_path: Path, spans=None, logs=None) -> EmbeddedStore:
    path = tmp_path / "telemetry.jsonl"
    path.write_bytes(otlp_json_line(spans, logs) + b"\n")
    reference = EmbeddedStore(tmp_path / "reference")
    report = ingest_files([str(path)], reference)
    assert report.rows > 0
    return reference


def _exporters(collector, kind: str):
    http = f"http://127.0.0.1:{collector.http.port}/v1/{kind}"
    grpc_at = f"127.0.0.1:{collector.grpc.port}"
    if kind == "traces":
        return [
            HttpSpans(endpoint=http, compression=HttpCompression.Gzip, timeout=10),
            GrpcSpans(endpoint=grpc_at, insecure=True, compression=grpc.Compression.Gzip,
                      timeout=10),
        ]
    return [
        HttpLogs(endpoint=http, compression=HttpCompression.Gzip, timeout=10),
        GrpcLogs(endpoint=grpc_at, insecure=True, compression=grpc.Compression.Gzip, timeout=10),
    ]


@pytest.mark.parametrize("protocol", [0, 1], ids=["http", "grpc"])
def test_exported_spans_equal_file_ingest(tmp_path: Path, protocol: int) -> None:
    spans = job_spans(20)
    reference = _from_file(tmp_path, spans=spans)
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        exporter = _exporters(collector, "traces")[protocol]
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
        exporter.shutdown()
    assert rows(store).equals(rows(reference))
    assert rows(store).num_rows == 20 * 4  # deliver, lock_acquire, side_effect, ack
    assert health["rejected"] == 1 and health["ignored"] == 1
    assert health["written"] == 80


@pytest.mark.parametrize("protocol", [0, 1], ids=["http", "grpc"])
def test_exported_logs_equal_file_ingest(tmp_path: Path, protocol: int) -> None:
    logs = job_logs(30)
    reference = _from_file(tmp_path, logs=logs)
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        exporter = _exporters(collector, "logs")[protocol]
        assert exporter.export(logs) == LogRecordExportResult.SUCCESS
        exporter.shutdown()
    assert rows(store).num_rows == 30
    assert rows(store).equals(rows(reference))


def test_exported_spans_with_deflate_equal_file_ingest(tmp_path: Path) -> None:
    spans = job_spans(20)
    reference = _from_file(tmp_path, spans=spans)
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        exporter = HttpSpans(endpoint=url, compression=HttpCompression.Deflate, timeout=10)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
    assert rows(store).equals(rows(reference))


def test_resending_a_batch_adds_no_rows(tmp_path: Path) -> None:
    spans = job_spans(10)
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        for exporter in _exporters(collector, "traces"):
            for _ in range(2):
                assert exporter.export(spans) == SpanExportResult.SUCCESS
            exporter.shutdown()
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
    assert raw_count(store) == 40  # written once; the three resends were skipped
    assert health["deduplicated"] == 120


def test_retry_after_a_client_timeout_adds_no_rows(tmp_path: Path) -> None:
    """The first send times out while its write is still going on; the retry is a repeat."""
    spans = job_spans(10)
    store = SlowStore(EmbeddedStore(tmp_path / "store"), delay=1.5)
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        impatient = HttpSpans(endpoint=url, timeout=0.5)
        assert impatient.export(spans) == SpanExportResult.FAILURE
        patient = HttpSpans(endpoint=url, timeout=10)
        assert patient.export(spans) == SpanExportResult.SUCCESS
        impatient.shutdown()
        patient.shutdown()
    assert raw_count(store) == 40
    assert rows(store).num_rows == 40


def test_partial_success_names_what_and_where(tmp_path: Path) -> None:
    from collect_support import post
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    spans = job_spans(3)
    body = encode_spans(spans).SerializeToString()
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        status, _, answer = post(url, body, "application/x-protobuf")
        json_status, _, json_answer = post(
            url, otlp_json_line(spans), "application/json"
        )
    assert status == 200
    response = ExportTraceServiceResponse.FromString(answer)
    assert response.partial_success.rejected_spans == 1
    message = response.partial_success.error_message
    assert "needs a job_id" in message and "spans[" in message
    assert json_status == 200 and b'"rejectedSpans":"1"' in json_answer.replace(b" ", b"")
    assert raw_count(store) == 12  # the JSON body repeated the protobuf one


def test_jsonlines_post_plain_and_gzip(tmp_path: Path) -> None:
    import gzip

    from collect_support import post

    lines = b"".join(
        b'{"ts": 1760000000, "event": "enqueue", "job_id": "j%d", "job_type": "t"}\n' % i
        for i in range(5)
    )
    store = EmbeddedStore(tmp_path / "store")
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/jsonlines"
        status, _, answer = post(url, lines + b"not json\n", "application/x-ndjson")
        assert status == 200
        assert orjson.loads(answer)["accepted"] == 5 and orjson.loads(answer)["rejected"] == 1
        assert b":6" in answer  # the bad line is named by its number
        status, _, answer = post(url, gzip.compress(lines), "application/x-ndjson",
                                 Content_Encoding="gzip")
        assert status == 200 and orjson.loads(answer)["accepted"] == 5
    assert raw_count(store) == 5  # the gzipped repeat changed nothing


@pytest.mark.clickhouse
def test_clickhouse_server_receives_exported_spans(tmp_path: Path) -> None:
    import os

    from store import open_store

    url = os.environ.get("DUPESCOPE_CLICKHOUSE_URL")
    if not url:
        pytest.skip("DUPESCOPE_CLICKHOUSE_URL is not set")
    store = open_store(url)
    spans = job_spans(3)
    with running(store) as collector:
        exporter = _exporters(collector, "traces")[0]
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
    trace_ids = sorted({format(s.context.trace_id, "032x") for s in spans})
    found = store.execute(
        "SELECT count(DISTINCT event_uid) AS n FROM events WHERE trace_id IN {ids:Array(String)}",
        {"ids": trace_ids},
    )
    assert int(found["n"][0]) == 12
