"""`--rq-redis URL`: poll RQ's state in Redis, read-only, into the store.

Two threads a Redis database. One reads what changed every `interval` seconds
(collectors/rq_redis.py): a run shorter than a poll's gap may be missed, so it never
waits on the store. The other hands each poll's rows to the collector's group-commit
writer, in order, waits until they are durable (retrying while the store refuses them),
and only then saves the reader's state as it was after that poll (the runs it saw
start), beside the store: a restarted collector ends the runs that ended meanwhile and
reads nothing twice (a row read again has the same uid, and the collector keeps one).

A lost connection is retried with exponential backoff; a row that cannot be made a
contract event is counted as rejected, its poll's other rows kept.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any

from collectors.normalise import Row
from collectors.rq_redis import PollState, RqRedisReader
from collectors.service.broker_source import (
    Backoff,
    BrokerSource,
    save_atomically,
    without_password,
)
from collectors.service.collector import Collector
from store.contract import content_uid

log = logging.getLogger("dupescope.collect")

INTERVAL = 0.1
#: Polls whose rows may wait for the store at once; then the poller waits too.
PENDING_POLLS = 256
INSTALL_HINT = "pip install 'dupescope[rq]'"


class RedisMissing(RuntimeError):
    """The redis client is not installed."""


def require_redis() -> None:
    try:
        import redis  # noqa: F401
    except ImportError as exc:
        raise RedisMissing(f"--rq-redis needs the redis client: {INSTALL_HINT}") from exc


def check_redis_url(url: str) -> None:
    """ValueError unless `url` is a redis:// (rediss://, unix://) URL. Connects to nothing."""
    import redis

    try:
        redis.Redis.from_url(url)
    except ValueError as exc:
        raise ValueError(f"--rq-redis: not a Redis URL ({exc})") from exc


def rq_state_path(state_dir: Path, url: str) -> Path:
    return state_dir / f"rq-redis-{content_uid('rq-redis', url)[:16]}.json"


class RqRedisSource(BrokerSource):
    """Polls one Redis database's RQ state until `stop()`."""

    label = "rq-redis"
    thread_name = "dupescope-rq-redis"

    def __init__(
        self, collector: Collector, url: str, state_path: Path, *,
        interval: float = INTERVAL, backoff: Backoff | None = None,
    ) -> None:
        require_redis()
        super().__init__(collector, backoff)
        self.url = url
        self.shown_url = without_password(url)
        self.state_path = state_path
        self.interval = interval
        self.stats = {"polls": 0, "rows": 0, "rejected": 0, "connects": 0}
        self._polled = threading.Event()  # the poller has stopped: the writer drains
        self._pending: queue.Queue[tuple[list[Row], int, bytes]] = queue.Queue(PENDING_POLLS)
        self._writer = threading.Thread(target=self._write, name="dupescope-rq-redis-write",
                                        daemon=True)

    def start(self) -> RqRedisSource:
        super().start()
        self._writer.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        self._polled.set()
        self._writer.join(timeout)

    def _load(self) -> PollState:
        try:
            return PollState.from_json(self.state_path.read_bytes())
        except FileNotFoundError:
            return PollState()
        except (ValueError, TypeError) as exc:
            log.warning("rq-redis state %s unreadable (%s); starting afresh", self.state_path,
                        exc)
            return PollState()

    def _session(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url, decode_responses=True,
                                      socket_timeout=5, socket_connect_timeout=5)
        client.ping()
        self.stats["connects"] += 1
        self._connected()
        log.info("rq-redis: polling %s", self.shown_url)
        reader = RqRedisReader(client, self.collector.decoder.normaliser, self._load())
        while not self._stop.is_set():
            seconds, micros = client.time()
            poll = reader.poll(seconds + micros / 1e6)
            self.stats["polls"] += 1
            if poll.rows or poll.rejected:
                # A run seen starting or ending brings rows: only then is there news to
                # keep (when each open run was last seen is only a lower bound).
                batch = (poll.rows, poll.rejected, reader.state.to_json())
                while not self._stop.is_set():
                    try:
                        self._pending.put(batch, timeout=0.2)
                        break
                    except queue.Full:
                        continue
            self._stop.wait(self.interval)

    def _write(self) -> None:
        """Each poll's rows made durable in order, then the state after that poll saved."""
        while not (self._polled.is_set() and self._pending.empty()):
            try:
                rows, rejected, state = self._pending.get(timeout=0.2)
            except queue.Empty:
                continue
            if not self._commit(rows, rejected, stop=self._polled):
                return
            self.stats["rows"] += len(rows)
            self.stats["rejected"] += rejected
            save_atomically(self.state_path, state)

    def health(self) -> dict[str, Any]:
        return {"redis": self.shown_url, "connected": self.connected.is_set(), **self.stats}
