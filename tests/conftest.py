"""Shared fixtures: stores of every kind, and contract events written inline."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Helpers in tests/support/ assert too (same_rows): their failures explain themselves.
pytest.register_assert_rewrite("support")

from collectors.arrow_batch import rows_to_table  # noqa: E402
from collectors.jsonlines import decode_lines  # noqa: E402
from collectors.normalise import Normaliser  # noqa: E402
from store.base import Store  # noqa: E402
from store.clickhouse import ChdbStore  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402


def listed_once(monkeypatch: pytest.MonkeyPatch, listing: list[Path]) -> None:
    """Every embedded store lists `listing` at its next look at its segments (a listing
    taken before a compaction moved them), and the folders as they are after that."""
    listings = iter([listing])
    real = EmbeddedStore.segments
    monkeypatch.setattr(EmbeddedStore, "segments", lambda self: next(listings, None) or real(self))


def events_to_table(records: list[dict]) -> pa.Table:
    """Contract events as dicts -> the canonical Arrow table, through the real normaliser."""
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, start=1)]
    decoded = decode_lines(lines, Normaliser(), "inline")
    assert not decoded.rejected, decoded.rejected
    return rows_to_table(decoded.rows)


@pytest.fixture
def make_table() -> Callable[[list[dict]], pa.Table]:
    return events_to_table


@pytest.fixture
def serve_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[dict]], str]:
    """Contract events -> an embedded store named in DUPESCOPE_STORE, where the dashboard
    looks for it; returns the store's folder."""

    def serve(records: list[dict]) -> str:
        opened = EmbeddedStore(tmp_path / "store")
        opened.write(events_to_table(records))
        monkeypatch.setenv("DUPESCOPE_STORE", str(opened.root))
        return str(opened.root)

    return serve


@pytest.fixture(scope="module")
def stories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStore]:
    """The dashboard's inline stories (tests/dashboard_cases.py), stored once a module."""
    from dashboard_cases import dashboard_events

    opened = EmbeddedStore(tmp_path_factory.mktemp("stories") / "store")
    opened.write(events_to_table(dashboard_events()))
    yield opened
    opened.close()


@pytest.fixture(params=["embedded", "chdb", pytest.param("clickhouse", marks=[
    pytest.mark.clickhouse,
    pytest.mark.skipif(not os.environ.get("DUPESCOPE_CLICKHOUSE_URL"),
                       reason="no live ClickHouse server: set DUPESCOPE_CLICKHOUSE_URL")])])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The same behaviour suite runs on the embedded store and on chDB, and on a live
    ClickHouse server where DUPESCOPE_CLICKHOUSE_URL names one (a database per test)."""
    if request.param == "embedded":
        opened: Store = EmbeddedStore(tmp_path / "store")
    elif request.param == "chdb":
        opened = ChdbStore(str(tmp_path / "chdb"))
    else:
        yield from _live_clickhouse()
        return
    yield opened
    opened.close()


def _live_clickhouse() -> Iterator[Store]:
    """A fresh database on the server DUPESCOPE_CLICKHOUSE_URL names, dropped after."""
    import uuid
    from urllib.parse import urlparse, urlunparse

    from store.open import open_store

    database = f"dupescope_test_{uuid.uuid4().hex[:12]}"
    parsed = urlparse(os.environ["DUPESCOPE_CLICKHOUSE_URL"])
    opened = open_store(urlunparse(parsed._replace(path=f"/{database}")))
    try:
        yield opened
    finally:
        opened.command(f"DROP DATABASE IF EXISTS {database}")
        opened.close()


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedStore]:
    opened = EmbeddedStore(tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture(scope="session", params=["redis", "rabbitmq"])
def celery_world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The Celery scenario (tests/celery_world), run once per broker per session: every
    source's tests score their rows against the same run and the same truth."""
    from celery_world.harness import CeleryWorld

    world = CeleryWorld(request.param, tmp_path_factory.mktemp(f"celery-{request.param}"))
    world.add_collector(
        "events", "--celery-broker", world.broker_url, "--celery-exchange",
        world.event_exchange, "--celery-key", "idempotency_key",
    )
    world.run()
    world.ingest_worker_logs("logs")
    return world
