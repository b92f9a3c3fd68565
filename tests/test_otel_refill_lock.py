"""The refill lock of the Collector's tables: a dead holder's lock is taken over, a live
holder's is waited for (store/otel.py, store/refill_holder.py), on chDB."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.otel_exporter_tables import exporter_tables

import sample_data
from sample_data.clickhouse_exporter import CollectingExporter, span_rows
from sample_data.otlp import export_spans
from store.base import StoreError
from store.otel import REFILL_STALE_S, OtelChdbStore, OtelSource, statement
from store.refill_holder import this_host

LOCK = "otel_dupescope.otel_refilling"


@pytest.fixture(scope="module")
def spans() -> list:
    workload = sample_data.generate(seed=5, target_events=60)
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    return span_rows(exporter.requests[:1])


@pytest.fixture
def store(spans: list, tmp_path: Path, monkeypatch) -> Iterator[OtelChdbStore]:
    import store.otel

    # A refresh that waited for the lock gives up after half a second, and says so.
    monkeypatch.setattr(store.otel, "REFILL_WAIT_S", 0.5)
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current", spans=spans)
    opened = OtelChdbStore(str(folder), OtelSource("otel"))
    yield opened
    opened.close()


def _held_by(store: OtelChdbStore, host: str, pid: int, seconds_ago: int = 0) -> None:
    store.command(statement("otel_refill_lock", own="otel_dupescope"))
    store.command(f"INSERT INTO {LOCK} VALUES (now() - {{ago:UInt32}}, {{host:String}}, "
                  "{pid:UInt32})", {"ago": seconds_ago, "host": host, "pid": pid})


def _events(store: OtelChdbStore) -> int:
    return int(store.execute("SELECT count() AS n FROM events")["n"][0])


def test_a_lock_whose_holder_process_ended_on_this_host_is_taken_over_at_once(
    store: OtelChdbStore,
) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    _held_by(store, this_host(), int(ended.stdout))
    store.refresh()
    assert _events(store) > 0


def test_a_lock_whose_holder_runs_on_this_host_is_waited_for(store: OtelChdbStore) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _held_by(store, this_host(), holder.pid)
        with pytest.raises(StoreError, match="another process has been refilling"):
            store.refresh()
    finally:
        holder.kill()
        holder.wait()
    store.refresh()  # its process gone, the lock is taken over
    assert _events(store) > 0


def test_a_lock_marked_recently_from_another_host_is_waited_for(store: OtelChdbStore) -> None:
    _held_by(store, "elsewhere", os.getpid(), seconds_ago=60)
    with pytest.raises(StoreError, match="another process has been refilling"):
        store.refresh()
    assert _events(store) == 0


def test_a_lock_another_host_stopped_marking_is_taken_over_once_stale(
    store: OtelChdbStore,
) -> None:
    _held_by(store, "elsewhere", os.getpid(), seconds_ago=REFILL_STALE_S + 60)
    store.refresh()
    assert _events(store) > 0


def test_the_lock_is_given_back_after_a_read(store: OtelChdbStore) -> None:
    store.refresh()
    held = store.execute("SELECT count() AS n FROM system.tables "
                         "WHERE database = 'otel_dupescope' AND name = 'otel_refilling'")
    assert int(held["n"][0]) == 0
