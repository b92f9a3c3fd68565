"""TLS on both receivers: real OTLP exporters send over HTTPS and secure gRPC, trusting a
test certificate authority; a plaintext client is refused without taking the collector
down; a certificate and key that do not match stop the collector at start."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
import trustme
from collect_support import ROOT, job_spans, raw_count, running
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk.trace.export import SpanExportResult

from collectors.service.run import CollectConfig, RunningCollector
from collectors.service.tls import TlsFiles
from store.embedded import EmbeddedStore


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls(tmp_path: Path, authority: trustme.CA) -> TlsFiles:
    issued = authority.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem")
    issued.cert_chain_pems[0].write_to_path(files.cert)
    issued.private_key_pem.write_to_path(files.key)
    return files


@pytest.fixture
def ca_file(tmp_path: Path, authority: trustme.CA) -> Path:
    path = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(path)
    return path


def test_http_exporter_sends_over_https(
    tmp_path: Path, tls: TlsFiles, ca_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets these override the exporter's certificate_file
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tls=tls) as collector:
        url = f"https://127.0.0.1:{collector.http.port}/v1/traces"
        exporter = HttpSpans(endpoint=url, certificate_file=str(ca_file), timeout=10)
        assert exporter.export(job_spans(5)) == SpanExportResult.SUCCESS
        exporter.shutdown()
    assert raw_count(store) == 20


def test_grpc_exporter_sends_over_tls(tmp_path: Path, tls: TlsFiles, ca_file: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tls=tls) as collector:
        credentials = grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())
        exporter = GrpcSpans(endpoint=f"localhost:{collector.grpc.port}", insecure=False,
                             credentials=credentials, timeout=10)
        assert exporter.export(job_spans(5)) == SpanExportResult.SUCCESS
        exporter.shutdown()
    assert raw_count(store) == 20


def test_plaintext_http_is_refused_and_the_collector_stays_up(
    tmp_path: Path, tls: TlsFiles, ca_file: Path
) -> None:
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tls=tls) as collector:
        port = collector.http.port
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10)
        trusting = ssl.create_default_context(cafile=str(ca_file))
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", timeout=10, context=trusting
        ) as answer:
            assert answer.status == 200


def test_a_client_that_never_handshakes_holds_up_no_other(
    tmp_path: Path, tls: TlsFiles, ca_file: Path
) -> None:
    with running(EmbeddedStore(tmp_path / "store"), tls=tls) as collector:
        port = collector.http.port
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        trusting = ssl.create_default_context(cafile=str(ca_file))
        started = time.monotonic()
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", timeout=10, context=trusting
        ) as answer:
            assert answer.status == 200
        assert time.monotonic() - started < 2  # not after the silent ones' 10 s timeout
        for connection in silent:
            connection.close()


def test_a_key_of_another_certificate_stops_the_start(
    tmp_path: Path, tls: TlsFiles, authority: trustme.CA
) -> None:
    other = tmp_path / "other-key.pem"
    authority.issue_cert("127.0.0.1").private_key_pem.write_to_path(other)
    config = CollectConfig(http_port=0, grpc_port=0, tls=TlsFiles(tls.cert, other))
    with pytest.raises(ssl.SSLError):
        RunningCollector(EmbeddedStore(tmp_path / "store"), config)


def test_the_cli_wants_a_key_with_a_certificate(tmp_path: Path, tls: TlsFiles) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from dupescope.cli import main; main()", "collect",
         "--store", str(tmp_path / "store"),
         "--tls-cert", str(tls.cert)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "--tls-cert and --tls-key go together" in result.stderr
