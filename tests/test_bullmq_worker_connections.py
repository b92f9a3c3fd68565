"""Which worker connections the BullMQ source counts as alive: those on its own database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from support.redis_db import claim_redis_db, release_redis_db

from collectors.service.bullmq_source import worker_connections


@pytest.fixture
def db() -> Iterator[int]:
    number = claim_redis_db()
    yield number
    release_redis_db(number)


def named_connection(db: int, name: str) -> redis.Redis:
    client = redis.Redis(db=db, single_connection_client=True)
    client.client_setname(name)
    return client


def test_a_worker_on_the_sources_database_is_listed(db: int) -> None:
    worker = named_connection(db, "bull:YmlsbGluZw==:w:w1")
    try:
        listed = worker_connections(redis.Redis(db=db), "bull")
        assert "bull:YmlsbGluZw==:w:w1" in listed.ids_by_name
    finally:
        worker.close()


def test_a_worker_of_the_same_name_on_another_database_is_not(db: int) -> None:
    other = db - 1 if db > 1 else db + 1
    worker = named_connection(other, "bull:YmlsbGluZw==:w:w1")
    try:
        listed = worker_connections(redis.Redis(db=db), "bull")
        assert "bull:YmlsbGluZw==:w:w1" not in listed.ids_by_name
    finally:
        worker.close()
