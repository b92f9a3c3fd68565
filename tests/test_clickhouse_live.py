"""A live ClickHouse server, where one is reachable (DUPESCOPE_CLICKHOUSE_URL)."""

import os
import uuid

import pytest

from queries import timeline
from store import open_store

URL = os.environ.get("DUPESCOPE_CLICKHOUSE_URL")

pytestmark = [
    pytest.mark.clickhouse,
    pytest.mark.skipif(
        not URL,
        reason="no live ClickHouse server: set DUPESCOPE_CLICKHOUSE_URL=clickhouse://... "
        "(the ClickHouse dialect is covered on chDB everywhere)",
    ),
]


def test_a_live_server_stores_and_answers_like_chdb(make_table) -> None:
    store = open_store(URL)
    key = f"live-{uuid.uuid4().hex}"
    records = [
        {
            "ts": "2025-11-30T12:00:00Z",
            "event": "deliver",
            "job_id": key,
            "job_type": "t",
            "idempotency_key": key,
            "delivery_attempt": 1,
            "worker_id": "w1",
        },
        {
            "ts": "2025-11-30T12:00:01Z",
            "event": "ack",
            "job_id": key,
            "job_type": "t",
            "idempotency_key": key,
            "delivery_attempt": 1,
            "worker_id": "w1",
        },
    ]
    store.write(make_table(records))
    store.write(make_table(records))
    frame = timeline(store, key)
    assert frame["event"].tolist() == ["deliver", "ack"]
    assert frame["execution"].tolist() == [1, 1]


def test_a_live_servers_collector_tables_answer_as_otlp_ingest(tmp_path) -> None:
    """The exporter's otel_traces on a real server, read in place (`?source=otel`)."""
    from urllib.parse import urlparse, urlunparse

    import clickhouse_connect
    import orjson

    import sample_data
    from collectors.arrow_batch import rows_to_table
    from collectors.normalise import Normaliser
    from collectors.otlp import decode_traces
    from queries import duplicates
    from sample_data.clickhouse_exporter import CollectingExporter, span_rows, traces_ddl
    from sample_data.otlp import export_spans
    from store.embedded import EmbeddedStore

    workload = sample_data.generate(seed=4, target_events=300, worker_crash=0.05)
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    embedded = EmbeddedStore(str(tmp_path / "embedded"))
    embedded.write(rows_to_table(
        [row for r in exporter.requests for row in decode_traces(r, Normaliser(), "otlp").rows]))

    parsed = urlparse(URL)
    database = f"otel_live_{uuid.uuid4().hex[:12]}"
    client = clickhouse_connect.get_client(
        host=parsed.hostname or "localhost", port=parsed.port or 8123,
        username=parsed.username or "default", password=parsed.password or "")
    try:
        client.command(f"CREATE DATABASE {database}")
        client.command(traces_ddl(database))
        lines = b"\n".join(orjson.dumps(row) for row in span_rows(exporter.requests))
        client.command(f"INSERT INTO {database}.otel_traces FORMAT JSONEachRow\n"
                       f"{lines.decode()}")
        url = urlunparse(parsed._replace(path=f"/{database}", query="source=otel"))
        store = open_store(url)
        try:
            got = duplicates(store).drop(columns=["first_ts", "last_ts"], errors="ignore")
        finally:
            store.close()
        expected = duplicates(embedded).drop(columns=["first_ts", "last_ts"], errors="ignore")
        assert len(got) > 0
        assert sorted(got["key"]) == sorted(expected["key"])
        assert dict(zip(got["key"], got["cause"], strict=True)) == dict(
            zip(expected["key"], expected["cause"], strict=True))
    finally:
        client.command(f"DROP DATABASE IF EXISTS {database}")
        client.command(f"DROP DATABASE IF EXISTS {database}_dupescope")
        client.close()
