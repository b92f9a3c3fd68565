"""A read of the Collector's tables in bounded chunks, newest day first, limited by
`?since=`, resumable after SIGKILL, with its progress told as it goes."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alert_receiver import make_watcher
from click.testing import CliRunner
from support.derived_rows import state
from support.otel_exporter_tables import exporter_tables

import sample_data
from alerts.metrics import AlertMetrics
from dupescope.cli import main
from sample_data.clickhouse_exporter import CollectingExporter, insert, span_rows
from sample_data.otlp import export_spans
from store.base import StoreError
from store.open import open_store
from store.otel import OtelChdbStore, OtelReading, OtelSource
from store.otel_chunks import Part, parse_since, plan
from store.otel_progress import ReadProgress

CHILD = Path(__file__).with_name("otel_chunk_kill_child.py")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    workload = sample_data.generate(seed=21, target_events=400, worker_crash=0.05)
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    return span_rows(exporter.requests)


def _moved(rows: list[dict], days: int) -> list[dict]:
    """The rows `days` earlier (a whole earlier day's traces)."""
    def shift(stamp: str) -> str:
        moved = datetime.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S") - timedelta(days=days)
        return moved.strftime("%Y-%m-%d %H:%M:%S") + stamp[19:]

    return [r | {"Timestamp": shift(r["Timestamp"]),
                 "Events.Timestamp": [shift(t) for t in r["Events.Timestamp"]]} for r in rows]


def _two_days(rows: list[dict], tmp_path: Path) -> Path:
    """The workload's first half of traces three days before the second, in parts of a
    few hundred spans."""
    traces = sorted({r["TraceId"] for r in rows})
    older = set(traces[: len(traces) // 2])
    spans = (_moved([r for r in rows if r["TraceId"] in older], 3)
             + [r for r in rows if r["TraceId"] not in older])
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current")
    from chdb import session

    s = session.Session(str(folder))
    try:
        insert(s, "otel.otel_traces", spans, chunk=300)
    finally:
        s.close()
    return folder


@pytest.fixture(scope="module")
def whole_state(rows: list[dict], tmp_path_factory) -> dict:
    """The derived state of one read of `_two_days` whole: what every chunked, resumed
    or merged read of the same tables must derive."""
    folder = _two_days(rows, tmp_path_factory.mktemp("whole"))
    whole = OtelChdbStore(str(folder), OtelSource("otel", own_db="whole"))
    try:
        whole.chunk_rows = 10**9
        return state(whole)
    finally:
        whole.close()


def test_chunks_go_newest_day_first_and_hold_at_most_the_bound() -> None:
    parts = [Part("t", "20261201", "a", 1, 60), Part("t", "20261203", "b", 2, 60),
             Part("t", "20261203", "c", 5, 60), Part("t", "20261202", "d", 3, 500)]
    chunks = plan(parts, max_rows=100)
    assert [[p.name for p in c] for c in chunks] == [["c"], ["b"], ["d"], ["a"]]


def test_parts_under_the_bound_share_a_chunk() -> None:
    parts = [Part("t", "20261203", n, b, 10) for n, b in (("a", 1), ("b", 2), ("c", 3))]
    assert [[p.name for p in c] for c in plan(parts, max_rows=25)] == [["c", "b"], ["a"]]


def test_since_is_hours_days_or_weeks() -> None:
    assert parse_since("36h") == timedelta(hours=36)
    assert parse_since("2w") == timedelta(weeks=2)
    with pytest.raises(ValueError, match="since='7x'"):
        parse_since("7x")


def test_a_bad_since_on_the_store_url_says_where(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="store URL.*since='soon'"):
        open_store(f"chdb://{tmp_path}?source=otel&since=soon")


def test_a_read_in_chunks_derives_what_one_read_does(rows: list[dict], tmp_path: Path,
                                                    whole_state: dict) -> None:
    folder = _two_days(rows, tmp_path)
    chunked = OtelChdbStore(str(folder), OtelSource("otel", own_db="chunked"))
    try:
        chunked.chunk_rows = 250
        told: list[ReadProgress] = []
        chunked.progress.follow(lambda p: told.append(ReadProgress(**vars(p))))
        assert state(chunked) == whole_state
    finally:
        chunked.close()
    assert told[-1].finished and told[-1].chunks_read == told[-1].chunks_total > 4
    days = [t.partition for t in told if not t.finished]
    assert days == sorted(days, reverse=True) and len(set(days)) == 2


def test_since_reads_only_the_days_from_then_on(rows: list[dict], tmp_path: Path) -> None:
    # The newer half on today, the older three days before: since=2d keeps today's only.
    newest = max(datetime.strptime(r["Timestamp"][:10], "%Y-%m-%d") for r in rows)
    moved = _moved(rows, (newest.date() - datetime.now(UTC).date()).days)
    folder = _two_days(moved, tmp_path)
    store = open_store(f"chdb://{folder}?source=otel&database=otel&since=2d")
    try:
        store.snapshot_id()  # reads the exporter's tables
        days = store.execute("SELECT DISTINCT toString(toDate(ts)) AS d FROM events")["d"]
    finally:
        store.close()
    today = datetime.now(UTC).date()
    assert today.isoformat() in set(days)
    assert min(days) >= (today - timedelta(days=2)).isoformat()


def test_a_chunked_read_killed_halfway_resumes_and_equals_one_read(
    rows: list[dict], tmp_path: Path, monkeypatch, whole_state: dict
) -> None:
    import store.otel

    folder = _two_days(rows, tmp_path)
    killed = subprocess.run([sys.executable, str(CHILD), str(folder), "2"],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    # The killed read left its refill lock, marked with its process: taken over at once
    # (a wait for it would give up after a second, and fail the test).
    monkeypatch.setattr(store.otel, "REFILL_WAIT_S", 1)
    resumed = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        taken = resumed.execute("SELECT count() AS n FROM otel_dupescope.otel_read_parts")
        assert int(taken["n"][0]) > 0  # the chunks read before the kill were kept
        assert state(resumed) == whole_state
    finally:
        resumed.close()


def test_the_cli_says_how_far_a_read_has_come(rows: list[dict], tmp_path: Path) -> None:
    folder = _two_days(rows, tmp_path)
    result = CliRunner().invoke(main, ["--store", f"chdb://{folder}?source=otel&database=otel",
                                       "duplicates", "--format", "json"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "Collector's tables" in line]
    assert lines[0].startswith("reading the Collector's tables: day ")
    assert lines[-1].startswith("read the Collector's tables") and "(100%)" in lines[-1]


def test_metrics_show_a_reads_rows(rows: list[dict], tmp_path: Path) -> None:
    folder = _two_days(rows, tmp_path)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    metrics = AlertMetrics()
    metrics.follow_reads(store)
    try:
        store.refresh()
    finally:
        store.close()
    read = metrics.registry.get_sample_value("dupescope_otel_read_rows")
    assert read == len(rows)
    assert metrics.registry.get_sample_value("dupescope_otel_read_chunks_left") == 0


def _plain_index_pairs(tmp_path: Path, events):
    """The index pairs of a plain insert of `events` into a store of its own."""
    from store.clickhouse import ChdbStore

    plain = ChdbStore(str(tmp_path / "plain"), database="plain")
    try:
        plain.write(events)
        return _index_pairs(plain)
    finally:
        plain.close()


def _index_pairs(store) -> list[tuple]:
    """What the id index answers: each key's and job_id's (key, job_id, day) pairs."""
    found = store.arrow("SELECT DISTINCT value, idempotency_key, job_id, day FROM events_ids "
                        "ORDER BY value, idempotency_key, job_id, day")
    return [tuple(r.values()) for r in found.to_pylist()]


def test_a_chunked_first_read_indexes_what_a_plain_insert_does(
    rows: list[dict], tmp_path: Path
) -> None:

    folder = _two_days(rows, tmp_path)
    chunked = OtelChdbStore(str(folder), OtelSource("otel", own_db="chunked"))
    try:
        chunked.chunk_rows = 250
        chunked.refresh()
        events = chunked.arrow("SELECT * FROM events")
        got = _index_pairs(chunked)
        views = chunked.execute("SELECT name FROM system.tables WHERE database = 'chunked' "
                                "AND name = 'events_ids_mv'")
    finally:
        chunked.close()
    assert len(got) > 100 and got == _plain_index_pairs(tmp_path, events)
    assert len(views) == 1  # the index's view is there again for the next inserts


def test_a_read_killed_between_insert_and_index_fill_resumes_with_the_index_complete(
    rows: list[dict], tmp_path: Path, monkeypatch
) -> None:
    import store.otel

    folder = _two_days(rows, tmp_path)
    killed = subprocess.run([sys.executable, str(CHILD), str(folder), "2", "between"],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    monkeypatch.setattr(store.otel, "REFILL_WAIT_S", 1)  # its lock is taken over at once
    resumed = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        resumed.refresh()
        events = resumed.arrow("SELECT * FROM events FINAL")
        got = _index_pairs(resumed)
    finally:
        resumed.close()
    assert len(got) > 100 and got == _plain_index_pairs(tmp_path, events)


def _newer_day_start(rows: list[dict]) -> datetime:
    """The first span start of the newer day of `_two_days` (its traces' first half)."""
    newest = max(r["Timestamp"][:10] for r in rows)
    first = min(r["Timestamp"] for r in rows if r["Timestamp"].startswith(newest))
    return datetime.strptime(first[:26], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


def _since_mid_newer_day(rows: list[dict]) -> datetime:
    """A time inside the newer day, after some of its spans and before others."""
    newest = max(r["Timestamp"][:10] for r in rows)
    starts = sorted(r["Timestamp"] for r in rows if r["Timestamp"].startswith(newest))
    middle = starts[len(starts) // 2]
    return datetime.strptime(middle[:26], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


def test_recent_rows_asked_for_are_read_first_and_alone(rows: list[dict],
                                                         tmp_path: Path) -> None:
    folder = _two_days(rows, tmp_path)
    since = _since_mid_newer_day(rows)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.chunk_rows = 250  # the backlog is more than a chunk
        store.read_recent_first(since)
        store.refresh()
        first = store.arrow("SELECT min(ts) AS ts, count() AS n FROM events").to_pylist()[0]
        recorded = store.arrow("SELECT (SELECT count() FROM otel_read) AS days, "
                               "(SELECT count() FROM otel_read_parts) AS parts").to_pylist()[0]
    finally:
        store.close()
    assert first["n"] > 0 and first["ts"] >= since
    assert recorded == {"days": 0, "parts": 0}  # the backlog is still to read, whole


def test_the_backlog_left_by_a_recent_read_is_read_next_and_derives_as_one_read(
    rows: list[dict], tmp_path: Path, whole_state: dict
) -> None:
    folder = _two_days(rows, tmp_path)
    recent = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        recent.chunk_rows = 250
        recent.read_recent_first(_since_mid_newer_day(rows))
        state(recent)  # derived over the recent rows alone
    finally:
        recent.close()
    later = OtelChdbStore(str(folder), OtelSource("otel"))  # the next question, any process
    try:
        assert state(later) == whole_state
    finally:
        later.close()


def test_a_backlog_within_a_chunk_is_read_whole_though_recent_rows_are_asked_for(
    rows: list[dict], tmp_path: Path
) -> None:
    folder = _two_days(rows, tmp_path)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.read_recent_first(_since_mid_newer_day(rows))  # a 2M-row chunk holds it all
        store.refresh()
        events = store.arrow("SELECT min(ts) AS ts FROM events").to_pylist()[0]["ts"]
    finally:
        store.close()
    assert events < _newer_day_start(rows)  # the older day was read too


def test_a_question_since_a_time_answers_from_those_rows_and_says_so(
    rows: list[dict], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(OtelReading, "chunk_rows", 250)
    folder = _two_days(rows, tmp_path)
    since = _since_mid_newer_day(rows)
    result = CliRunner().invoke(main, ["--store", f"chdb://{folder}?source=otel&database=otel",
                                       "duplicates", "--format", "json",
                                       "--since", since.isoformat()])
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "Collector's tables" in line]
    assert said == [f"read the Collector's tables from {since.isoformat()} on first (newest "
                    f"day {since:%Y%m%d}); the {len(rows):,} rows of the backlog are read "
                    "whole by the next refresh: until then a key is judged by its rows from "
                    "then on"]


def test_parts_merged_while_a_chunked_read_runs_lose_no_row(
    rows: list[dict], tmp_path: Path, whole_state: dict
) -> None:
    """The exporter's server merges parts all the time: a part planned for a later chunk
    may be merged away before that chunk reads it."""
    folder = _two_days(rows, tmp_path)
    merging = OtelChdbStore(str(folder), OtelSource("otel", own_db="merging"))
    try:
        merging.chunk_rows = 250
        merged: list[int] = []

        def merge_after_the_first_chunk(progress: ReadProgress) -> None:
            if progress.chunks_read == 1 and not merged:
                merging.command("OPTIMIZE TABLE otel.otel_traces FINAL")
                merged.append(1)

        merging.progress.follow(merge_after_the_first_chunk)
        got = state(merging)
    finally:
        merging.close()
    assert merged and got == whole_state


def test_parts_merged_while_a_chunk_is_read_are_read_again(
    rows: list[dict], tmp_path: Path, whole_state: dict
) -> None:
    """A merge while the last chunk is read: no later chunk reads the merged part."""
    folder = _two_days(rows, tmp_path)
    merging = OtelChdbStore(str(folder), OtelSource("otel", own_db="merging"))
    try:
        merging.chunk_rows = 250
        told: list[ReadProgress] = []
        merging.progress.follow(lambda p: told.append(ReadProgress(**vars(p))))
        fill, merged = merging._fill, []

        def fill_then_merge(stages: list[tuple[str, str]]) -> None:
            last = bool(told) and told[-1].chunks_read == told[-1].chunks_total - 1
            if last and not merged:
                merging.command("OPTIMIZE TABLE otel.otel_traces FINAL")
                merged.append(1)
            fill(stages)

        merging._fill = fill_then_merge  # type: ignore[method-assign]
        got = state(merging)
    finally:
        merging.close()
    assert merged and got == whole_state


# ---- watch's first round on a table never read -----------------------------------------


@pytest.fixture(scope="module")
def lock_trouble() -> list[dict]:
    """An hour of spans with locks expiring under their holders, duplicates and crashes:
    incidents inside a watch's first window and before it."""
    workload = sample_data.generate(seed=21, target_events=1200, hours=1.0, lock_expiry=0.3,
                                    worker_crash=0.05, producer_retry=0.1)
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    return span_rows(exporter.requests)


def _events_read(store: OtelChdbStore) -> dict:
    return store.arrow("SELECT min(ts) AS ts, count() AS n FROM events").to_pylist()[0]


def test_watch_reads_the_window_of_its_first_round_first_and_the_backlog_next_round(
    rows: list[dict], tmp_path: Path
) -> None:
    folder = _two_days(rows, tmp_path)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.chunk_rows = 250  # the backlog is more than a chunk
        watcher = make_watcher(store, [], lateness_s=600)
        watcher.tick()
        first = _events_read(store)
        watcher.tick()
        second = _events_read(store)
    finally:
        store.close()
    newest = max(datetime.strptime(r["Timestamp"][:26], "%Y-%m-%d %H:%M:%S.%f")
                 for r in rows).replace(tzinfo=UTC)
    assert first["n"] > 0 and first["ts"] >= newest - timedelta(seconds=600)
    assert second["n"] > first["n"] and second["ts"] < _newer_day_start(rows)


def test_watch_fires_over_a_window_read_first_what_it_fires_over_the_table_read_whole(
    lock_trouble: list[dict], tmp_path: Path
) -> None:
    fired: dict[str, tuple[set[str], set[str]]] = {}
    for name, chunk_rows in (("whole", 10**9), ("window_first", 250)):
        folder = _two_days(lock_trouble, tmp_path / name)
        store = OtelChdbStore(str(folder), OtelSource("otel"))
        try:
            store.chunk_rows = chunk_rows  # one chunk holds it all: read whole at once
            watcher = make_watcher(store, [], lateness_s=900)
            rounds = [{a.id for a in watcher.tick()} for _ in range(2)]
            fired[name] = (rounds[0], rounds[1])
        finally:
            store.close()
    whole, window_first = fired["whole"], fired["window_first"]
    assert whole[0] and not whole[1]  # the whole table's incidents, all in the first round
    assert window_first[0]  # the window's own incidents, before the backlog is read
    assert window_first[0] | window_first[1] == whole[0]


def test_the_dashboard_reads_the_window_it_shows_first_and_the_backlog_for_everything(
    rows: list[dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard_app import APP, texts
    from streamlit.testing.v1 import AppTest

    from dashboard import source

    folder = _two_days(rows, tmp_path)
    monkeypatch.setattr(OtelReading, "chunk_rows", 250)  # the backlog is more than a chunk
    url = f"chdb://{folder}?source=otel"
    monkeypatch.setenv("DUPESCOPE_STORE", url)
    left = "are read when the time range is Everything"
    try:
        app = AppTest.from_file(str(APP), default_timeout=60)
        app.query_params["window"] = "Last hour"  # a link to /?window=Last+hour
        app.run()
        assert not app.exception
        first = source.with_store(url, _events_read)
        assert any(left in text for text in texts(app.sidebar.info))
        app.sidebar.selectbox(key="window").set_value("all").run()
        assert not app.exception
        second = source.with_store(url, _events_read)
        assert not any(left in text for text in texts(app.sidebar.info))
    finally:
        source.close(url)
    newest = max(datetime.strptime(r["Timestamp"][:26], "%Y-%m-%d %H:%M:%S.%f")
                 for r in rows).replace(tzinfo=UTC)
    assert first["n"] > 0 and first["ts"] >= newest - timedelta(hours=1)
    assert second["n"] > first["n"] and second["ts"] < _newer_day_start(rows)


def test_the_dashboard_is_told_each_chunk_of_a_read_it_waits_for(
    rows: list[dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard import source

    folder = _two_days(rows, tmp_path)
    monkeypatch.setattr(OtelReading, "chunk_rows", 250)
    url = f"chdb://{folder}?source=otel"
    told: list[tuple[int, int, bool]] = []
    try:
        source.snapshot(url, None, lambda p: told.append((p.chunks_read, p.chunks_total,
                                                          p.finished)))
        listeners = source.with_store(url, lambda store: list(store.progress.listeners))
    finally:
        source.close(url)
    chunks = told[-1][1]
    assert chunks > 1 and told[-1] == (chunks, chunks, True)
    assert [c for c, _, _ in told[:-1]] == list(range(1, chunks + 1))
    assert not listeners  # the page stops listening once its read is done
