"""A Redis database of a test's own: queues keep fixed key names (RQ's registries,
Sidekiq's retry set, Celery's event stream are per database), so two tests that share
one would read each other's jobs."""

from __future__ import annotations

import os

REDIS_HOST = "127.0.0.1"
REDIS_PORT = 6379
CLAIM_KEY = "dupescope-test:claimed-by"
CLAIM_SECONDS = 3600


def claim_redis_db(lowest: int = 1, highest: int = 15) -> int:
    """An empty database (highest first), marked as taken by a key that `release_redis_db`
    removes and that expires by itself after CLAIM_SECONDS, so a killed test leaks no
    database for long. The mark counts only where it is the database's one key, so two
    tests choosing at once never take the same one. DUPESCOPE_TEST_REDIS_DB overrides."""
    import redis

    chosen = os.environ.get("DUPESCOPE_TEST_REDIS_DB")
    if chosen:
        return int(chosen)
    for db in range(highest, lowest - 1, -1):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        if client.dbsize() != 0:
            continue
        claimed = client.set(CLAIM_KEY, str(os.getpid()), nx=True, ex=CLAIM_SECONDS)
        if claimed and client.dbsize() == 1:
            return db
    raise RuntimeError("no empty Redis database left to claim (all 15 hold keys)")


def release_redis_db(db: int) -> None:
    """Give the database back (its other keys are the test's to delete)."""
    import redis

    redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db).delete(CLAIM_KEY)
