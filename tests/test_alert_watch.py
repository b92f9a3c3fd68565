"""`watch` across re-ingestion, restarts and kill -9: every incident fires once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alert_receiver import Receiver, make_watcher
from forensics_cases import locked

from alerts import history
from alerts.ids import alert_id
from alerts.sinks import MemorySink
from alerts.state import open_state
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
OVERRUN = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])
HEADLINE_ID = alert_id("lock_expired_while_running", "j1", 1, "lock:acct-1", "o1")


def test_re_ingesting_the_same_events_fires_nothing_new(embedded, make_table) -> None:
    sink = MemorySink()
    watcher = make_watcher(embedded, [sink])
    embedded.write(make_table(OVERRUN))
    assert [a.id for a in watcher.tick()] == [HEADLINE_ID]
    embedded.write(make_table(OVERRUN))  # an exporter's retry: the same batch again
    assert watcher.tick() == []
    embedded.compact()
    assert watcher.tick() == []
    assert [key for key, _ in sink.received] == [HEADLINE_ID]


@pytest.fixture
def overrun_folder(tmp_path, make_table) -> Path:
    """An embedded store's folder holding the headline overrun, for watches that reopen it."""
    folder = tmp_path / "store"
    EmbeddedStore(folder).write(make_table(OVERRUN))
    return folder


def test_a_restarted_watch_fires_nothing_it_fired_before(overrun_folder) -> None:
    folder = overrun_folder
    first, second = MemorySink(), MemorySink()
    assert len(make_watcher(EmbeddedStore(folder), [first]).tick()) == 1
    assert make_watcher(EmbeddedStore(folder), [second]).tick() == []
    assert len(first.received) == 1 and second.received == []


def test_late_events_within_the_lateness_still_fire(embedded, make_table) -> None:
    sink = MemorySink()
    watcher = make_watcher(embedded, [sink], lateness_s=120)
    embedded.write(make_table(locked("j1", 1, "w1", "o1", "05:00", 10_000, [("05:05", "ack")])))
    assert watcher.tick() == []  # renewed in time: nothing; the watermark is now 12:05:05
    late = locked("j2", 1, "w2", "o2", "03:30", 10_000, [("03:45", "ack")], lock_key="lock:b")
    too_late = locked("j3", 1, "w3", "o3", "01:00", 10_000, [("01:15", "ack")], lock_key="lock:c")
    embedded.write(make_table(late + too_late))
    assert [a.job_id for a in watcher.tick()] == ["j2"]


#: Two overruns an hour apart in event time: one long before the newest event, one recent.
HOUR_OLD = locked("j0", 1, "w0", "o0", "00:00", 10_000, [("00:15", "ack")], lock_key="lock:old")
RECENT = locked("j1", 1, "w1", "o1", "58:00", 10_000, [("58:15", "ack")])


def test_a_first_watch_over_kept_history_alerts_on_recent_incidents_only(
    embedded, make_table
) -> None:
    sink = MemorySink()
    embedded.write(make_table(HOUR_OLD + RECENT))
    watcher = make_watcher(embedded, [sink], lateness_s=120)
    assert [a.job_id for a in watcher.tick()] == ["j1"]
    embedded.write(make_table(locked("j2", 1, "w2", "o2", "59:00", 10_000, [("59:01", "ack")],
                                     lock_key="lock:b")))
    assert [a.job_id for a in watcher.tick()] == []  # the old one stays history
    assert [doc["job_id"] for _, doc in sink.received] == ["j1"]


def test_a_first_watch_with_all_history_alerts_on_every_kept_incident(
    embedded, make_table
) -> None:
    embedded.write(make_table(HOUR_OLD + RECENT))
    watcher = make_watcher(embedded, [MemorySink()], lateness_s=120)
    watcher.history = True
    assert sorted(a.job_id for a in watcher.tick()) == ["j0", "j1"]


def test_a_watch_begun_on_an_empty_store_alerts_on_all_that_arrives(
    embedded, make_table
) -> None:
    watcher = make_watcher(embedded, [MemorySink()], lateness_s=120)
    assert watcher.tick() == []
    embedded.write(make_table(HOUR_OLD + RECENT))  # an hour of logs ingested at once
    assert sorted(a.job_id for a in watcher.tick()) == ["j0", "j1"]


def test_watch_all_history_reaches_the_first_round(tmp_path, make_table) -> None:
    folder = tmp_path / "store"
    EmbeddedStore(folder).write(make_table(HOUR_OLD + RECENT))
    with Receiver() as receiver:
        default = _watch_once(folder, receiver.url, options=["--lateness", "120"])
        assert "1 new alert(s)" in default.stderr, default.stderr
        assert "--all-history" in default.stderr  # the log says how to get the rest
    shutil.rmtree(folder / "alerts")  # a watch that starts again from no alert state
    with Receiver() as receiver:
        everything = _watch_once(folder, receiver.url, options=["--all-history"])
        assert "2 new alert(s)" in everything.stderr, everything.stderr
        assert len(receiver.keys()) == 2


def test_history_lists_what_fired_newest_first(embedded, make_table) -> None:
    assert history(embedded).empty
    embedded.write(make_table(OVERRUN))
    make_watcher(embedded, [MemorySink()]).tick()
    frame = history(embedded)
    assert list(frame["alert_id"]) == [HEADLINE_ID]
    row = frame.iloc[0]
    assert (row["rule"], row["severity"], row["key"], row["deliveries_sent"]) == (
        "lock_expired_while_running", "warning", "j1", 1
    )
    assert str(row["incident_ts"]) == "2025-11-30 12:00:15+00:00"


def test_chdb_keeps_alert_state_in_tables(tmp_path, make_table) -> None:
    store = ChdbStore(str(tmp_path / "chdb"))
    try:
        store.write(make_table(OVERRUN))
        sink = MemorySink()
        watcher = make_watcher(store, [sink])
        assert [a.id for a in watcher.tick()] == [HEADLINE_ID]
        store.write(make_table(OVERRUN))
        assert watcher.tick() == []
        again = make_watcher(store, [MemorySink()])
        assert again.tick() == []
        assert again.state.watermark().isoformat() == "2025-11-30T12:00:15+00:00"
        frame = history(store)
        assert list(frame["alert_id"]) == [HEADLINE_ID]
        assert frame.iloc[0]["deliveries_sent"] == 1
        assert open_state(store).pending_count() == 0
    finally:
        store.close()


def _watch_once(
    folder: Path, url: str, fault: str | None = None, options: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    env = {**os.environ, "DUPESCOPE_ALERT_BACKOFF_S": "0.01"}
    env.pop("DUPESCOPE_ALERTS_FAULT", None)
    if fault:
        env["DUPESCOPE_ALERTS_FAULT"] = fault
    code = "from dupescope.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "watch", "--store", str(folder), "--webhook", url, "--once",
         *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


def test_killed_after_the_outbox_write_delivers_after_restart(overrun_folder) -> None:
    folder = overrun_folder
    with Receiver() as receiver:
        crashed = _watch_once(folder, receiver.url, fault="after_outbox")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert receiver.requests == []  # detected and queued, never sent
        restarted = _watch_once(folder, receiver.url)
        assert restarted.returncode == 0, restarted.stderr
        assert "0 new alert(s); 0 delivery(ies) pending" in restarted.stderr
    assert receiver.keys() == [HEADLINE_ID]


def test_killed_after_sending_repeats_with_the_same_id(overrun_folder) -> None:
    folder = overrun_folder
    with Receiver() as receiver:
        crashed = _watch_once(folder, receiver.url, fault="after_send")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert _watch_once(folder, receiver.url).returncode == 0
        assert _watch_once(folder, receiver.url).returncode == 0
    # Sent before the crash and again after: the receiver drops the repeat by its key.
    assert receiver.keys() == [HEADLINE_ID, HEADLINE_ID]
    assert list(receiver.accepted) == [HEADLINE_ID]


def test_a_clock_in_the_future_does_not_blind_the_watch(embedded, make_table) -> None:
    sink = MemorySink()
    now = datetime(2025, 11, 30, 12, 1, tzinfo=UTC)  # a minute after OVERRUN ended
    watcher = make_watcher(embedded, [sink], lateness_s=120, clock=lambda: now)
    future = locked("jf", 1, "wf", "of", "00:00", 10_000, [("00:01", "ack")], lock_key="lock:f")
    for event in future:
        event["ts"] = "2999-01-01" + event["ts"][10:]
    embedded.write(make_table(future))
    assert watcher.tick() == []
    embedded.write(make_table(OVERRUN))  # long before the future events, not before now
    assert [a.id for a in watcher.tick()] == [HEADLINE_ID]


def _tick_starts(embedded, interval_s: float, tick_s: float, ticks: int = 3) -> list[float]:  # type: ignore[no-untyped-def]
    """When each of `ticks` ticks started, each taking `tick_s`, under `run(interval_s)`."""
    import threading
    import time

    watcher = make_watcher(embedded, [MemorySink()])
    stop = threading.Event()
    starts: list[float] = []

    def tick() -> list:  # type: ignore[type-arg]
        starts.append(time.monotonic())
        time.sleep(tick_s)
        if len(starts) == ticks:
            stop.set()
        return []

    watcher.tick = tick  # type: ignore[method-assign]
    watcher.run(interval_s, stop)
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


def test_a_tick_longer_than_the_interval_is_followed_by_the_next_at_once(embedded) -> None:
    # Counted from the start of the last tick: not the tick's 0.5 s and 0.4 s more.
    assert max(_tick_starts(embedded, interval_s=0.4, tick_s=0.5)) < 0.8


def test_a_quick_tick_still_waits_for_the_interval(embedded) -> None:
    assert min(_tick_starts(embedded, interval_s=0.3, tick_s=0.0)) >= 0.29
