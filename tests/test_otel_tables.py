"""The OpenTelemetry Collector's ClickHouse tables, read in place, answer as OTLP ingest does.

The workload model's spans go two ways: over OTLP into the embedded store (the collector's
decoder), and into chDB tables made with the exporter's DDL, as rows the exporter writes
(nested Events, every Map value a string). `--store chdb:///path?source=otel` must then give
the same forensics, for each layout of the tables, and never touch them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pandas as pd
import pytest
from chdb import session
from click.testing import CliRunner
from opentelemetry import trace
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from support.derived_rows import state
from support.otel_exporter_tables import exporter_tables

import sample_data
from collectors.arrow_batch import rows_to_table
from collectors.normalise import Normaliser
from collectors.otlp import decode_logs, decode_traces
from derive import catalogue
from dupescope.cli import main
from queries import derived, timeline
from sample_data.clickhouse_exporter import (
    CollectingExporter,
    insert,
    log_rows,
    span_rows,
)
from sample_data.otlp import export_spans
from store.base import SegmentedStore, Store, StoreError, to_frame
from store.embedded import EmbeddedStore
from store.open import open_store
from store.otel import OtelChdbStore, OtelSource

FIELDS = ("ts", "event", "job_id", "job_type", "idempotency_key", "resource_key", "queue",
          "delivery_attempt", "worker_id", "lock_key", "lock_owner", "lock_ttl_ms",
          "visibility_timeout_ms", "service_version", "trace_id", "span_id", "execution_id")
# (traces with JSON attributes?, logs layout)
LAYOUTS = {
    "map, logs since v0.151": (False, "current"),
    "map, logs with TimestampTime": (False, "timestamp_time"),
    "json": (True, "json"),
}


@pytest.fixture(scope="module")
def requests() -> list:
    workload = sample_data.generate(seed=11, target_events=500, worker_crash=0.05)
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    return exporter.requests


@pytest.fixture(scope="module")
def otlp_rows(requests: list) -> list[dict]:
    return [row for r in requests for row in decode_traces(r, Normaliser(), "otlp").rows]


@pytest.fixture(scope="module")
def embedded(requests: list, otlp_rows: list[dict], tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("embedded")
    store = EmbeddedStore(str(folder))
    store.write(rows_to_table(otlp_rows))
    store.close()
    return folder


@pytest.fixture(scope="module", params=list(LAYOUTS), ids=list(LAYOUTS))
def layout_folder(request, requests: list, tmp_path_factory) -> Path:
    json_attrs, logs = LAYOUTS[request.param]
    return exporter_tables(tmp_path_factory.mktemp("otel"), json_attrs=json_attrs, logs=logs,
                           spans=span_rows(requests, json=json_attrs))


@pytest.fixture
def otel_store(layout_folder: Path) -> Iterator[OtelChdbStore]:
    store = OtelChdbStore(str(layout_folder), OtelSource("otel"))
    yield store
    store.close()


@pytest.fixture(scope="module")
def otel_folder(requests: list, tmp_path_factory) -> Path:
    """The Map layout, for the commands: every layout gives the same events (above)."""
    return exporter_tables(tmp_path_factory.mktemp("otel"), json_attrs=False, logs="current",
                           spans=span_rows(requests))


def canonical(frame: pd.DataFrame) -> list[tuple]:
    """Rows as comparable tuples: the canonical fields, and attrs with every value as text
    (the exporter's Map columns hold strings only)."""
    out = []
    for row in frame.to_dict("records"):
        values = tuple(None if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)
                       for v in (row[f] for f in FIELDS))
        attrs = json.loads(row["attrs"]) if isinstance(row["attrs"], str) else {}
        out.append((*values, tuple(sorted((k, str(v).lower() if isinstance(v, bool) else str(v))
                                          for k, v in attrs.items()))))
    return sorted(out)


def test_the_mapping_gives_the_otlp_decoders_rows(otel_store: OtelChdbStore,
                                                  otlp_rows: list[dict]) -> None:
    expected = to_frame(rows_to_table(otlp_rows))
    otel_store.refresh()
    got = otel_store.execute("SELECT * FROM events")
    assert len(got) == len(expected) > 300
    assert canonical(got) == canonical(expected)


def test_the_layout_is_read_from_system_columns(otel_store: OtelChdbStore) -> None:
    source = otel_store.source
    json_attrs = source.traces.json
    assert source.logs.json == json_attrs
    described = otel_store.describe()
    assert ("JSON attributes" in described) == json_attrs
    assert ("TimestampTime" in described) == source.logs.timestamp_time


def test_the_exporters_tables_answer_a_snapshot_and_a_keys_rows(otel_folder: Path) -> None:
    """A Store without segments, whose own `events` copy is its index: a snapshot id, and
    a key's timeline read from it by its sort key (timeline.sql), not from the user's
    tables."""
    store = open_store(f"chdb://{otel_folder}?source=otel")
    try:
        assert isinstance(store, Store) and not isinstance(store, SegmentedStore)
        assert store.segmented() is None
        assert store.snapshot_id()
        key = store.execute(
            "SELECT idempotency_key AS k FROM events WHERE idempotency_key IS NOT NULL LIMIT 1"
        )["k"].iloc[0]
        assert store.key_rows(key) is None
        assert len(timeline(store, key)) > 0
    finally:
        store.close()


def cli(store: str, *args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["--store", store, *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_duplicates_with_cause_equal_those_over_otlp(otel_folder: Path,
                                                     embedded: Path) -> None:
    got = cli(f"chdb://{otel_folder}?source=otel", "duplicates")
    expected = cli(str(embedded), "duplicates")
    assert {r["cause"] for r in expected} >= {"worker_crash"}
    assert got == expected


def test_timeline_and_alerts_equal_those_over_otlp(otel_folder: Path, embedded: Path) -> None:
    url = f"chdb://{otel_folder}?source=otel"
    key = cli(str(embedded), "duplicates")[0]["key"]
    drop = ("event_uid", "attrs")  # a uid of the mapping's own; attrs' values are text
    got = [{k: v for k, v in r.items() if k not in drop} for r in cli(url, "timeline", key)]
    expected = [{k: v for k, v in r.items() if k not in drop}
                for r in cli(str(embedded), "timeline", key)]
    assert len(got) > 3 and got == expected
    assert cli(url, "alerts") == cli(str(embedded), "alerts")


def _tables_of(folder: Path) -> list[tuple]:
    s = session.Session(str(folder))
    try:
        text = s.query(
            "SELECT name, engine, create_table_query, total_rows FROM system.tables "
            "WHERE database = 'otel' ORDER BY name", "JSONCompact").bytes()
    finally:
        s.close()
    return [tuple(r) for r in orjson.loads(text)["data"]]


def test_stats_and_watch_run_and_never_write_the_exporters_tables(
    requests: list, tmp_path: Path
) -> None:
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             spans=span_rows(requests[:1]))
    before = _tables_of(folder)
    url = f"chdb://{folder}?source=otel"
    assert cli(url, "stats")
    result = CliRunner().invoke(main, ["--store", url, "watch", "--once"])
    assert result.exit_code == 0, result.output
    assert _tables_of(folder) == before
    store = open_store(url)
    try:
        with pytest.raises(StoreError, match="read in place"):
            store.write(rows_to_table([]))
    finally:
        store.close()


def test_new_spans_are_read_on_the_next_question(requests: list, tmp_path: Path) -> None:
    half = len(requests) // 2
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             spans=span_rows(requests[:half]))
    url = f"chdb://{folder}?source=otel"
    first = open_store(url)
    try:
        assert first.refresh() == first.refresh()  # unchanged tables: the same events
        before = int(first.execute("SELECT count() AS n FROM events")["n"][0])
    finally:
        first.close()
    exporter_tables(folder, json_attrs=False, logs="current", spans=span_rows(requests[half:]))
    store = open_store(url)
    try:
        store.refresh()
        after = int(store.execute("SELECT count() AS n FROM events")["n"][0])
    finally:
        store.close()
    assert before < after


def _log(attrs: dict, ns: int, body: str | None = None) -> LogRecord:
    record = LogRecord(time_unix_nano=ns)
    for key, value in attrs.items():
        any_value = (AnyValue(int_value=value) if isinstance(value, int)
                     else AnyValue(string_value=value))
        record.attributes.append(KeyValue(key=key, value=any_value))
    if body is not None:
        record.body.string_value = body
    return record


def _log_request() -> ExportLogsServiceRequest:
    """Two deliveries of one job as log records, the second after a silent first."""
    request = ExportLogsServiceRequest()
    logs = request.resource_logs.add()
    for key, value in (("service.name", "worker"), ("host.name", "h1")):
        logs.resource.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    logs.resource.attributes.append(KeyValue(key="process.pid", value=AnyValue(int_value=7)))
    records = logs.scope_logs.add().log_records
    base = 1_764_504_000_000_000_000
    common = {"job_id": "j-1", "job_type": "charge", "idempotency_key": "order-1"}
    records.append(_log({**common, "event": "enqueue"}, base))
    records.append(_log({**common, "event": "deliver", "delivery_attempt": 1}, base + 10**9))
    records.append(_log({**common, "event": "side_effect", "delivery_attempt": 1},
                        base + 2 * 10**9, body="charged"))
    records.append(_log({**common, "event": "deliver", "delivery_attempt": 2}, base + 60 * 10**9))
    records.append(_log({**common, "event": "side_effect", "delivery_attempt": 2},
                        base + 61 * 10**9))
    records.append(_log({**common, "event": "ack", "delivery_attempt": 2}, base + 62 * 10**9))
    records.append(_log({"msg": "an application log line, no job event"}, base + 63 * 10**9))
    return request


def _derived(folder: Path, sql: str) -> pd.DataFrame:
    """`sql` over the events a store derives from the exporter's tables in `folder`."""
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.refresh()
        return store.execute(sql)
    finally:
        store.close()


@pytest.mark.parametrize("layout", ["current", "timestamp_time", "json"])
def test_log_records_give_the_otlp_decoders_rows(layout: str, tmp_path: Path) -> None:
    request = _log_request()
    expected = to_frame(rows_to_table(decode_logs(request, Normaliser(), "otlp").rows))
    folder = exporter_tables(tmp_path / "otel", json_attrs=layout == "json", logs=layout,
                             logs_rows=log_rows([request], json=layout == "json"))
    got = _derived(folder, "SELECT * FROM events")
    assert len(got) == 6
    assert canonical(got) == canonical(expected)
    assert set(got["delivery_attempt"].dropna()) == {1, 2}  # arrived as '1' and '2'


def test_a_table_that_is_not_the_exporters_is_refused(tmp_path: Path) -> None:
    s = session.Session(str(tmp_path))
    try:
        s.query("CREATE DATABASE otel")
        s.query("CREATE TABLE otel.otel_traces (Timestamp DateTime64(9)) ENGINE = MergeTree "
                "ORDER BY Timestamp")
    finally:
        s.close()
    with pytest.raises(StoreError, match="otel_traces.*no TraceId"):
        OtelChdbStore(str(tmp_path), OtelSource("otel"))


def test_a_log_record_spelling_no_field_gives_the_otlp_decoders_row(tmp_path: Path) -> None:
    """A worker's start logged with no job, host, trace or span: no key of it spells a
    field, and the read takes it as the decoder does."""
    request = ExportLogsServiceRequest()
    logs = request.resource_logs.add()
    logs.resource.attributes.append(KeyValue(key="service.name",
                                             value=AnyValue(string_value="worker")))
    logs.scope_logs.add().log_records.append(_log({"event": "worker_start"},
                                                  1_764_504_000_000_000_000))
    expected = to_frame(rows_to_table(decode_logs(request, Normaliser(), "otlp").rows))
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             logs_rows=log_rows([request], json=False))
    got = _derived(folder, "SELECT * FROM events")
    assert list(got["event"]) == ["worker_start"]
    assert canonical(got) == canonical(expected)


def _span(name: str, kind: str, attrs: dict, *, start: str = "2025-11-30 12:00:00.000000000",
          duration_ns: int = 2_000_000_000, span_id: str = "00000000000000a1",
          events: list[tuple[str, str, dict]] = ()) -> dict:
    """One otel_traces row as the exporter writes it (every attribute value a string)."""
    return {
        "Timestamp": start, "TraceId": "0" * 31 + "1", "SpanId": span_id, "ParentSpanId": "",
        "SpanName": name, "SpanKind": kind, "ServiceName": "svc",
        "ResourceAttributes": {"service.name": "svc", "host.name": "h1", "process.pid": "7"},
        "SpanAttributes": attrs, "Duration": duration_ns, "StatusCode": "Unset",
        "StatusMessage": "",
        "Events.Timestamp": [e[0] for e in events], "Events.Name": [e[1] for e in events],
        "Events.Attributes": [e[2] for e in events],
    }


def _events_of(tmp_path: Path, spans: list[dict]) -> list[dict]:
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current", spans=spans)
    return _derived(folder, "SELECT * FROM events ORDER BY ts, event").to_dict("records")


def test_attrs_keep_any_text_of_keys_and_values_as_json(tmp_path: Path) -> None:
    """Quotes, backslashes, slashes, control characters, non-ASCII text and empty strings
    in the attributes no field takes come back as they were, from the span and its step."""
    odd = {'say "hi"\\': "a/b\n\t\x01 é ✓", "": "", "plain": 'it\'s "x"'}
    span = _span("charge process", "Consumer",
                 {"job_id": "j-odd", "delivery_attempt": "1", **odd},
                 events=[("2025-11-30 12:00:01.000000000", "side_effect", {"step\\": '"'})])
    deliver, effect = _events_of(tmp_path, [span])
    for row in (deliver, effect):
        attrs = json.loads(row["attrs"])
        assert {k: attrs[k] for k in odd} == odd
    assert json.loads(effect["attrs"])["step\\"] == '"'


def test_a_producer_span_naming_a_job_is_its_enqueue(tmp_path: Path) -> None:
    rows = _events_of(tmp_path, [_span("send charge", "Producer",
                                       {"messaging.message.id": "j-1", "job_type": "charge"})])
    assert [(r["event"], r["job_id"]) for r in rows] == [("enqueue", "j-1")]
    assert pd.isna(rows[0]["worker_id"])  # the producer is no worker: not the resource's


def test_a_celery_run_span_is_one_execution_settled_at_its_end(tmp_path: Path) -> None:
    run = _span("run/tasks.charge", "Consumer", {
        "celery.action": "run", "celery.task_name": "tasks.charge",
        "messaging.message.id": "t-1", "celery.retries": "1",
        "celery.delivery_info": "{'redelivered': True, 'priority': 0}",
        "celery.state": "RETRY", "celery.retry.reason": "Retry in 5s: timeout"})
    rows = _events_of(tmp_path, [run])
    assert [r["event"] for r in rows] == ["deliver", "nack"]
    assert {r["delivery_attempt"] for r in rows} == {3}  # retries '1' + 1, redelivered + 1
    assert json.loads(rows[1]["attrs"])["reason"] == "Retry in 5s: timeout"
    assert rows[0]["execution_id"] == rows[1]["execution_id"] == "00000000000000a1"


def test_a_deliver_span_event_is_the_executions_one_delivery(tmp_path: Path) -> None:
    span = _span("charge process", "Consumer",
                 {"messaging.message.id": "j-2", "delivery_attempt": "2"},
                 events=[("2025-11-30 12:00:00.500000000", "deliver", {}),
                         ("2025-11-30 12:00:01.000000000", "side_effect", {}),
                         ("2025-11-30 12:00:01.500000000", "ack", {})])
    rows = _events_of(tmp_path, [span])
    assert [r["event"] for r in rows] == ["deliver", "side_effect", "ack"]
    assert str(rows[0]["ts"]).startswith("2025-11-30 12:00:00.5")
    assert {r["delivery_attempt"] for r in rows} == {2}  # arrived as '2'


def test_a_step_spelling_wins_where_it_comes_first_or_is_the_same(tmp_path: Path) -> None:
    """A step's attributes lie over its span's, and each field takes the first spelling
    present in both: the step's canonical name before the span's `job.` form, the span's
    canonical name before the step's `job.` form, the step's value for the same name."""
    span = _span("charge process", "Consumer", {
        "job_id": "j-1", "job.lock_owner": "span-job-form", "lock_key": "span-canonical",
        "job.queue": "q-span"},
        events=[("2025-11-30 12:00:01.000000000", "lock_acquire", {
            "lock_owner": "step-canonical", "job.lock_key": "step-job-form",
            "job.queue": "q-step", "tenant": "acme"})])
    rows = _events_of(tmp_path, [span])
    assert [(r["event"], r["lock_owner"], r["lock_key"], r["queue"]) for r in rows] == [
        ("deliver", "span-job-form", "span-canonical", "q-span"),
        ("lock_acquire", "step-canonical", "span-canonical", "q-step")]
    assert json.loads(rows[1]["attrs"])["tenant"] == "acme"
    assert "tenant" not in json.loads(rows[0]["attrs"])


def test_a_refill_waits_for_another_process_and_says_so(requests: list, tmp_path: Path,
                                                        monkeypatch) -> None:
    import store.otel

    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             spans=span_rows(requests[:1]))
    store_ = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store_.command("CREATE TABLE otel_dupescope.otel_refilling (at DateTime) ENGINE = Memory")
        monkeypatch.setattr(store.otel, "REFILL_WAIT_S", 0.5)
        with pytest.raises(StoreError, match="another process has been refilling"):
            store_.refresh()
        store_.command("DROP TABLE otel_dupescope.otel_refilling")
        store_.refresh()
        assert int(store_.execute("SELECT count() AS n FROM events")["n"][0]) > 0
    finally:
        store_.close()


def test_every_dashboard_page_works_on_the_exporters_tables(otel_folder: Path, embedded: Path,
                                                            monkeypatch) -> None:
    from dashboard_app import open_page, texts

    from dashboard import source

    key = cli(str(embedded), "duplicates")[0]["key"]
    url = f"chdb://{otel_folder}?source=otel"
    monkeypatch.setenv("DUPESCOPE_STORE", url)
    try:
        app = open_page("timeline", key=key)
        assert not app.exception
        assert len(app.get("plotly_chart")) == 1  # the key's swimlanes
        assert [s.value for s in app.subheader][:2] == ["Executions", "Events"]
        for page in ("overview", "durations", "alerts", "checklist"):
            app.switch_page(f"app_pages/{page}.py").run()
            assert not app.exception, page
            assert not any("holds no events yet" in text for text in texts(app.info)), page
    finally:
        source.close(url)


def _trace_ids(rows: list[dict]) -> set[str]:
    return {r["TraceId"] for r in rows}


def test_a_refresh_reads_the_new_spans_only(requests: list, tmp_path: Path) -> None:
    rows = sorted(span_rows(requests), key=lambda r: r["Timestamp"])
    last = {r["TraceId"]: r["SpanId"] for r in rows}  # each trace's latest span
    earlier = [r for r in rows[:len(rows) // 2] if last[r["TraceId"]] != r["SpanId"]]
    later = [r for r in rows if r not in earlier]
    assert _trace_ids(earlier) & _trace_ids(later)  # jobs whose spans span both inserts
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             spans=earlier)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.refresh()
        before = store.execute("SELECT toString(max(ingested_at)) AS t FROM events")["t"][0]
        insert(store._session, "otel.otel_traces", later)
        store.refresh()
        added = store.execute("SELECT DISTINCT span_id FROM events "
                              "WHERE ingested_at > toDateTime64({t:String}, 6)", {"t": before})
    finally:
        store.close()
    assert set(added["span_id"]) and set(added["span_id"]) <= {r["SpanId"] for r in later}


def test_the_derived_state_over_the_exporters_tables_follows_batch_after_batch(
    requests: list, embedded: Path, tmp_path: Path
) -> None:
    quarter = len(requests) // 4
    batches = [requests[i * quarter:(i + 1) * quarter] for i in range(3)]
    batches.append(requests[3 * quarter:])
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current")
    live = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        for n, batch in enumerate(batches):
            insert(live._session, "otel.otel_traces", span_rows(batch))
            if n == 2:  # the exporter's parts merged: read parts with a new one among them
                insert(live._session, "otel.otel_traces", span_rows(batch[:1]))
                live.command("OPTIMIZE TABLE otel.otel_traces FINAL")
            kept = state(live)
            fresh = OtelChdbStore(str(folder), OtelSource("otel", own_db=f"fresh_{n}"))
            try:
                assert kept == state(fresh), f"after batch {n}"
            finally:
                fresh.close()
        expected = EmbeddedStore(str(embedded))
        try:
            assert sorted(derived.query(live, "duplicates", **catalogue.UNFILTERED)["key"]) == \
                sorted(derived.query(expected, "duplicates", **catalogue.UNFILTERED)["key"])
        finally:
            expected.close()
    finally:
        live.close()


def test_a_day_the_exporter_dropped_is_dropped_from_events(requests: list,
                                                           tmp_path: Path) -> None:
    rows = span_rows(requests)
    old = [dict(r, Timestamp="2025-10-01" + r["Timestamp"][10:]) for r in rows[:20]]
    folder = exporter_tables(tmp_path / "otel", json_attrs=False, logs="current",
                             spans=rows + old)
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        store.refresh()
        days = "SELECT count() AS n FROM events WHERE toDate(ts) = '2025-10-01'"
        assert int(store.execute(days)["n"][0]) > 0
        store.command("ALTER TABLE otel.otel_traces DROP PARTITION ID '20251001'")
        store.refresh()
        assert int(store.execute(days)["n"][0]) == 0
    finally:
        store.close()


def _job_with_step_spans(json_attrs: bool = False, job_id: str = "j-steps") -> list[dict]:
    """A job's run whose span is an execution only by its children: lifecycle steps as
    child spans, the run span itself naming no event and no attempt."""
    exporter = CollectingExporter()
    provider = TracerProvider(resource=Resource.create({"host.name": "w1", "process.pid": 7}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("worker")
    job = {"job_id": job_id, "job_type": "mail.send", "idempotency_key": f"mail-{job_id}"}
    start = 1_764_504_000_000_000_000
    run = tracer.start_span("mail.send run", attributes=job, start_time=start)
    context = trace.set_span_in_context(run)
    for offset, step in ((1, "side_effect"), (2, "ack")):
        child = tracer.start_span(step, context=context, attributes=job,
                                  start_time=start + offset * 10**9)
        child.end(end_time=start + offset * 10**9 + 1000)
    run.end(end_time=start + 3 * 10**9)
    return span_rows(exporter.requests, json=json_attrs)


def _children_and_parent(json_attrs: bool) -> tuple[list[dict], list[dict]]:
    """The job's step child spans' rows, and its run span's."""
    rows = _job_with_step_spans(json_attrs)
    return ([r for r in rows if r["ParentSpanId"]], [r for r in rows if not r["ParentSpanId"]])


def _read_in_two_inserts(folder: Path, first: list[dict], second: list[dict], *,
                         json_attrs: bool, forget: bool = False) -> None:
    """Refresh after each insert of the job with step child spans (each insert a part of
    its own); then its events are a run with its steps, and the kept state equals a
    build from nothing. `forget`: reopen in between without the kept step child spans, as
    an earlier version of dupescope left its database."""
    exporter_tables(folder, json_attrs=json_attrs, logs="current",
                    spans=first)
    live = OtelChdbStore(str(folder), OtelSource("otel"))
    try:
        live.refresh()
        if forget:
            live.command("DROP TABLE otel_dupescope.otel_step_children")
            live.command("DROP TABLE otel_dupescope.otel_idle_spans")
            live.close()
            live = OtelChdbStore(str(folder), OtelSource("otel"))
        insert(live._session, "otel.otel_traces", second)
        kept = state(live)
        events = live.execute("SELECT event FROM events FINAL WHERE job_id = 'j-steps'")
        assert sorted(events["event"]) == ["ack", "deliver", "side_effect"]
        fresh = OtelChdbStore(str(folder), OtelSource("otel", own_db="fresh"))
        try:
            assert kept == state(fresh)
        finally:
            fresh.close()
    finally:
        live.close()


@pytest.mark.parametrize("json_attrs", [False, True], ids=["map", "json"])
def test_a_span_read_after_its_children_is_an_execution_by_them(tmp_path: Path,
                                                                 json_attrs: bool) -> None:
    children, parent = _children_and_parent(json_attrs)
    _read_in_two_inserts(tmp_path / "otel", children, parent, json_attrs=json_attrs)


@pytest.mark.parametrize("json_attrs", [False, True], ids=["map", "json"])
def test_a_span_read_before_its_children_is_read_again_with_them(tmp_path: Path,
                                                                  json_attrs: bool) -> None:
    children, parent = _children_and_parent(json_attrs)
    _read_in_two_inserts(tmp_path / "otel", parent, children, json_attrs=json_attrs)


def test_a_span_read_after_more_kept_children_than_spans_read_is_an_execution_by_them(
        tmp_path: Path) -> None:
    """The parents of a refresh's spans are found through the kept children's sort key
    where those outnumber the spans read, through a set of the kept parents otherwise:
    either way the run span read alone after two jobs' children is an execution."""
    children, parent = _children_and_parent(False)
    other = [r for r in _job_with_step_spans(job_id="j-other") if r["ParentSpanId"]]
    _read_in_two_inserts(tmp_path / "otel", children + other, parent, json_attrs=False)


def test_a_database_read_before_step_children_were_kept_is_read_again(tmp_path: Path) -> None:
    children, parent = _children_and_parent(False)
    _read_in_two_inserts(tmp_path / "otel", children, parent, json_attrs=False, forget=True)


def test_boto3sqs_spans_map_as_over_otlp(tmp_path: Path) -> None:
    """An SQS consumer's `process` span (its receive count recorded, as
    docs/queues-sidekiq-sqs.md shows) is one execution; a poll's `receive` span nothing."""
    sqs = {"messaging.system": "aws.sqs", "messaging.destination": "charges"}
    process = _span("charges process", "Consumer", {
        **sqs, "messaging.operation": "process", "messaging.message_id": "m-1",
        "aws.sqs.approximate_receive_count": "2"})
    receive = _span("charges receive", "Consumer", {**sqs, "messaging.operation": "receive"},
                    span_id="00000000000000a2")
    rows = _events_of(tmp_path, [process, receive])
    assert [(r["event"], r["job_id"], r["delivery_attempt"]) for r in rows] == [
        ("deliver", "m-1", 2)
    ]


def test_each_field_takes_its_first_spelling_present(tmp_path: Path) -> None:
    """The canonical name before its `job.` form before the contract's aliases, as the
    normaliser picks them; what no field takes stays in attrs."""
    span = _span("charge process", "Consumer", {
        "messaging.message.id": "m-9", "job.job_id": "j-9",
        "messaging.destination.name": "q-alias", "job.queue": "q-job",
        "aws.sqs.approximate_receive_count": "5", "job.delivery_attempt": " 3 ",
        "job.lock_ttl_ms": "3000", "lock_ttl_ms": "4000", "tenant": "acme"},
        events=[("2025-11-30 12:00:01.000000000", "side_effect", {"job.job_id": "j-10"})])
    rows = _events_of(tmp_path, [span])
    assert [(r["event"], r["job_id"], r["queue"], r["delivery_attempt"], r["lock_ttl_ms"])
            for r in rows] == [("deliver", "j-9", "q-job", 3, 4000),
                               ("side_effect", "j-10", "q-job", 3, 4000)]
    assert json.loads(rows[0]["attrs"])["tenant"] == "acme"
    assert "job.queue" not in json.loads(rows[0]["attrs"])
