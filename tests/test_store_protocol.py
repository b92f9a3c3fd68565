"""The Store protocol: what every store answers, and what only a folder of segments does.

Callers ask a store through these methods and never probe it for attributes; a store
without a cheaper way (a snapshot id, a key's rows, segments) says None, and the caller
asks `events` instead.
"""

from pathlib import Path

import pytest

from queries.loader import render
from store import open_store
from store.base import SegmentedStore, Store
from store.clickhouse import ChdbStore, ClickHouseStore
from store.embedded import EmbeddedStore
from store.otel import OtelChdbStore, OtelClickHouseStore

CHARGE = [
    {"ts": "2025-11-30T12:00:00Z", "event": "enqueue", "job_id": "j1",
     "job_type": "billing.charge", "idempotency_key": "inv-1"},
    {"ts": "2025-11-30T12:00:01Z", "event": "deliver", "job_id": "j1",
     "job_type": "billing.charge", "idempotency_key": "inv-1", "delivery_attempt": 1,
     "worker_id": "w1"},
    {"ts": "2025-11-30T12:00:02Z", "event": "ack", "job_id": "j1",
     "job_type": "billing.charge", "delivery_attempt": 1, "worker_id": "w1"},
]
OTHER = [
    {"ts": "2025-11-30T13:00:00Z", "event": "enqueue", "job_id": "j2",
     "job_type": "billing.charge", "idempotency_key": "inv-2"},
]


def _methods(protocol: type) -> list[str]:
    return sorted(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_"))


@pytest.mark.parametrize(
    ("store_class", "protocol"),
    [
        (EmbeddedStore, SegmentedStore),
        (ChdbStore, Store),
        (ClickHouseStore, Store),
        (OtelChdbStore, Store),
        (OtelClickHouseStore, Store),
    ],
)
def test_every_store_class_implements_each_method_it_declares(store_class: type,
                                                             protocol: type) -> None:
    """A store class names its protocol as a base (so mypy checks it); a method it left
    out would fall back to the protocol's empty body, which answers None."""
    assert protocol in store_class.__mro__
    inherited = [n for n in _methods(Store) + _methods(protocol)
                 if getattr(store_class, n) in (vars(Store).get(n), vars(protocol).get(n))]
    assert inherited == []


def test_a_folder_opens_as_a_store_that_keeps_segments(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    try:
        assert isinstance(store, Store)
        assert isinstance(store, SegmentedStore)
        assert store.segmented() is store
    finally:
        store.close()


def test_chdb_opens_as_a_store_without_segments(tmp_path: Path) -> None:
    store = open_store(f"chdb://{tmp_path / 'chdb'}")
    try:
        assert isinstance(store, Store)
        assert not isinstance(store, SegmentedStore)
        assert store.segmented() is None
    finally:
        store.close()


def test_the_embedded_snapshot_id_changes_with_a_write(embedded: EmbeddedStore,
                                                       make_table) -> None:
    embedded.write(make_table(CHARGE))
    before = embedded.snapshot_id()
    embedded.write(make_table(OTHER))
    assert isinstance(before, str) and embedded.snapshot_id() != before


def test_the_embedded_store_finds_a_keys_rows_through_its_index(embedded: EmbeddedStore,
                                                                 make_table) -> None:
    embedded.write(make_table(CHARGE + OTHER))
    embedded.compact()
    rows = embedded.key_rows("inv-1")
    assert rows is not None
    # A superset of the timeline: the key's rows and its job's ack, which names no key.
    found = set(zip(rows["job_id"].to_pylist(), rows["event"].to_pylist(), strict=True))
    assert found >= {("j1", "enqueue"), ("j1", "deliver"), ("j1", "ack")}


def test_chdb_leaves_the_snapshot_and_a_keys_rows_to_sql(tmp_path: Path, make_table) -> None:
    store = ChdbStore(str(tmp_path / "chdb"))
    try:
        store.write(make_table(CHARGE))
        assert store.snapshot_id() is None
        assert store.key_rows("inv-1") is None
    finally:
        store.close()


def test_a_command_runs_a_statement_with_bound_parameters(store: Store) -> None:
    if store.dialect == "duckdb":
        store.command("CREATE TEMP TABLE kept (n BIGINT)")
    else:
        store.command("CREATE TABLE kept (n Int64) ENGINE = Memory")
    store.command(render("INSERT INTO kept SELECT :n", store.dialect, {"n": 7}), {"n": 7})
    assert store.arrow("SELECT n FROM kept")["n"].to_pylist() == [7]
