"""Acknowledged means durable: a SIGKILLed collector loses no acknowledged batch and
stores none twice; the embedded store can be read by another process while the
collector writes; chDB works as the collector's store too."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from collect_support import ROOT, Subprocess, job_spans, post, raw_count, rows, running
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from sample_data.otlp_requests import trace_request
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore

PB = "application/x-protobuf"
SPANS = 50


def _sender(url: str, first: int, acked: list[int], stop: threading.Event) -> None:
    batch = first
    while not stop.is_set():
        body = trace_request(batch, SPANS).SerializeToString()
        try:
            status, _, _ = post(url, body, PB)
        except OSError:
            return  # the collector died under us: this batch was not acknowledged
        if status == 200:
            acked.append(batch)
        batch += 2


def test_sigkill_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    acked: list[int] = []
    collector = Subprocess(store_path)
    stop = threading.Event()
    senders = [
        threading.Thread(target=_sender, args=(collector.url + "/v1/traces", i, acked, stop))
        for i in range(2)
    ]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + 20
    while len(acked) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    collector.kill()  # SIGKILL, mid-stream
    stop.set()
    for sender in senders:
        sender.join(30)
    assert len(acked) >= 6

    restarted = Subprocess(store_path)
    status, _, _ = post(restarted.url + "/v1/traces",
                        trace_request(10_000, SPANS).SerializeToString(), PB)
    restarted.stop()
    assert status == 200
    store = EmbeddedStore(store_path)
    counts = store.execute(
        "SELECT split_part(job_id, '-', 1) AS batch, count(*) AS n, "
        "count(DISTINCT event_uid) AS uids FROM events GROUP BY 1"
    )
    stored = {row.batch: (row.n, row.uids) for row in counts.itertuples()}
    for batch in [*acked, 10_000]:
        assert stored.get(f"b{batch}") == (SPANS * 4, SPANS * 4), batch


def test_embedded_store_is_readable_by_another_process_while_collecting(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    reader = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time; sys.path.insert(0, sys.argv[1])\n"
            "from store.embedded import EmbeddedStore\n"
            "s = EmbeddedStore(sys.argv[2]); seen = 0; end = time.time() + 4\n"
            "while time.time() < end:\n"
            "    seen = max(seen, int(s.execute('SELECT count(*) AS n FROM events')['n'][0]))\n"
            "print(seen)\n"
        ), str(ROOT), str(tmp_path / "store")],
        stdout=subprocess.PIPE, text=True,
    )
    with running(store) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        for batch in range(20):
            assert post(url, trace_request(batch, 20).SerializeToString(), PB)[0] == 200
            time.sleep(0.05)
    out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0
    assert 0 < int(out) <= 20 * 20 * 4
    assert raw_count(store) == 20 * 20 * 4


def test_chdb_store_receives_the_same_rows(tmp_path: Path) -> None:
    spans = job_spans(5)
    body = encode_spans(spans).SerializeToString()
    embedded = EmbeddedStore(tmp_path / "embedded")
    chdb = ChdbStore(str(tmp_path / "chdb"))
    for target in (embedded, chdb):
        with running(target) as collector:
            url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
            assert post(url, body, PB)[0] == 200
            assert post(url, body, PB)[0] == 200  # a resend
    assert raw_count(chdb) == 20
    on_chdb = rows(chdb).to_pylist()
    on_embedded = rows(embedded).to_pylist()
    assert [r["event_uid"] for r in on_chdb] == [r["event_uid"] for r in on_embedded]
    assert [r["attrs"] for r in on_chdb] == [r["attrs"] for r in on_embedded]
    chdb.close()


def test_a_dead_decoding_worker_is_replaced(tmp_path: Path) -> None:
    import os
    import signal

    store = EmbeddedStore(tmp_path / "store")
    with running(store, decode_workers=1) as collector:
        url = f"http://127.0.0.1:{collector.http.port}/v1/traces"
        assert post(url, trace_request(1, 10).SerializeToString(), PB)[0] == 200
        pool = collector.collector.decoder._pool
        for pid in list(pool._processes):  # noqa: SLF001 - the test kills a worker on purpose
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        status, headers, _ = post(url, trace_request(2, 10).SerializeToString(), PB)
        assert status in (200, 503)
        assert post(url, trace_request(3, 10).SerializeToString(), PB)[0] == 200
    assert raw_count(store) in (80, 120)
