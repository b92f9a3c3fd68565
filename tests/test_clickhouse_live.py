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
