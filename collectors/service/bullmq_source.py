"""`--bullmq-redis URL`: read BullMQ's events streams, as QueueEvents does, into the store.

One thread a Redis. It finds the queues (`SCAN` for `<prefix>:*:events` streams, again
every DISCOVER_SECONDS) or takes the named ones, reads them with `XREAD` from the last
entry it stored, reads the job hash of each job an entry names (HMGET, pipelined) and,
where Redis allows it, lists the connections (`CLIENT LIST`) to tell a stalled worker
from a crashed one (collectors/bullmq_events.py). Rows go to the collector's group-commit
writer one read at a time; once they are durable, the last stream id of each queue is
written to the state file (written whole to a temporary name, fsynced, renamed). A
receiver stopped or killed at any point resumes from the last ids stored: entries read
again carry the same event_uids, so the store keeps one row each.

BullMQ trims each stream to about 10,000 entries (XTRIM MAXLEN ~). Where the stream's
oldest entry is newer than the stored id, the entries after the stored one were trimmed
before they were read (the receiver was away too long): a warning names the queue and the
ids, and the queue's runs in progress are forgotten. (A trim that stopped exactly at the
entry after the stored one is warned about too: the stream cannot tell it apart.)

It only reads: XREAD, SCAN, HMGET, XINFO, CLIENT LIST, TIME. A lost connection is retried
with exponential backoff. A malformed entry is counted as rejected and logged (queue,
stream id, what is wrong); the others are kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from collectors.bullmq_events import (
    HASH_FIELDS,
    NEEDS_HASH,
    BullMQMapper,
    Clients,
    Entry,
    parse_stream_id,
    previous_id,
)
from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import RecordError, Row
from collectors.service.broker_source import (
    Backoff,
    BrokerSource,
    save_atomically,
    without_password,
)
from collectors.service.collector import Collector

log = logging.getLogger("dupescope.collect")

INSTALL_HINT = "pip install 'dupescope[bullmq]'"
#: How long one XREAD waits for entries (ms).
BLOCK_MS = 200
#: Entries one XREAD returns at most, over all streams.
READ_COUNT = 2_000
#: Seconds between two searches for new queues.
DISCOVER_SECONDS = 5.0


class RedisMissing(RuntimeError):
    """The redis client is not installed."""


def require_redis() -> None:
    """Raise RedisMissing, naming the extra to install, unless the redis client imports."""
    try:
        import redis  # noqa: F401
    except ImportError as exc:
        raise RedisMissing(f"--bullmq-redis needs the redis client: {INSTALL_HINT}") from exc


class StreamState:
    """The last stored entry id of each stream, in a JSON file written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids: dict[str, str] = {}
        try:
            loaded = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("bullmq: state file %s unreadable (%s): reading the streams from "
                        "their start (entries read again are one row each)", path, exc)
            return
        if isinstance(loaded, dict):
            self.ids = {str(k): str(v) for k, v in loaded.items() if isinstance(v, str)}

    def save(self) -> None:
        save_atomically(self.path, orjson.dumps(self.ids, option=orjson.OPT_SORT_KEYS))


class BullMQSource(BrokerSource):
    """Reads one Redis's BullMQ events streams until `stop()`."""

    label = "bullmq redis"
    thread_name = "dupescope-bullmq"

    def __init__(
        self,
        collector: Collector,
        url: str,
        state_path: Path,
        *,
        prefix: str = "bull",
        queues: Iterable[str] = (),
        mapping: FieldMapping = DEFAULT_MAPPING,
        list_clients: bool = True,
        block_ms: int = BLOCK_MS,
        read_count: int = READ_COUNT,
        discover_seconds: float = DISCOVER_SECONDS,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        require_redis()
        super().__init__(collector, backoff)
        self.url = url
        self.shown_url = without_password(url)
        self.prefix = prefix
        self.named_queues = list(queues)
        self.list_clients = list_clients
        self.block_ms = block_ms
        self.read_count = read_count
        self.discover_seconds = discover_seconds
        self.clock = clock
        self.mapper = BullMQMapper(stream_name=self.shown_url, prefix=prefix, mapping=mapping)
        self.state = StreamState(state_path)
        self.stats = {"entries": 0, "rows": 0, "malformed": 0, "connects": 0, "queues": 0,
                      "trimmed": 0}
        self._streams: dict[str, str] = {}  # stream key -> queue
        self._discovered_at = -1e18

    def _state_key(self, queue: str) -> str:
        return f"{self.shown_url}|{self.prefix}|{queue}"

    # -- the loop ---------------------------------------------------------------------

    def _session(self) -> None:
        import redis

        client = redis.Redis.from_url(
            self.url, decode_responses=True, socket_connect_timeout=5,
            socket_timeout=self.block_ms / 1000 + 10,
        )
        try:
            client.ping()
            self.stats["connects"] += 1
            self._streams = {}
            self._discovered_at = -1e18
            self._discover(client)
            self._connected()
            log.info("bullmq: reading %s (prefix %s, %d queue(s))", self.shown_url,
                     self.prefix, len(self._streams))
            while not self._stop.is_set():
                self._discover(client)
                if not self._streams:
                    self._stop.wait(self.block_ms / 1000)
                    continue
                self._read_once(client)
        finally:
            client.close()

    def _discover(self, client: Any) -> None:
        """Find the queues' streams (all, or the named ones), and check each new one (and
        every known one, each time) for entries trimmed before they were read."""
        now = self.clock()
        if now - self._discovered_at < self.discover_seconds:
            return
        self._discovered_at = now
        if self.named_queues:
            found = {f"{self.prefix}:{q}:events": q for q in self.named_queues}
        else:
            found = {}
            head, tail = f"{self.prefix}:", ":events"
            for key in client.scan_iter(match=f"{_glob_escape(self.prefix)}:*:events",
                                        count=1000, _type="stream"):
                if key.startswith(head) and key.endswith(tail) and len(key) > len(head + tail):
                    found[key] = key[len(head):-len(tail)]
        for key, queue in found.items():
            if key not in self._streams:
                self._streams[key] = queue
                log.info("bullmq: reading queue %s (%s)", queue, key)
        self.stats["queues"] = len(self._streams)
        for key, queue in self._streams.items():
            self._check_trimmed(client, key, queue)

    def _check_trimmed(self, client: Any, key: str, queue: str) -> None:
        last = self.state.ids.get(self._state_key(queue))
        if last is None:
            return
        try:
            info = client.xinfo_stream(key)
        except Exception:  # no stream yet (a named queue never used), or Redis < 5
            return
        first = info.get("first-entry")
        oldest = first[0] if isinstance(first, list | tuple) and first else None
        if not isinstance(oldest, str) or _id_order(oldest) <= _id_order(last):
            return
        self.stats["trimmed"] += 1
        log.warning(
            "bullmq: queue %s: the stream %s was trimmed past the last entry stored (%s): "
            "its oldest entry is now %s, and the entries between were lost unread; runs in "
            "progress there are forgotten", queue, key, last, oldest,
        )
        self.mapper.forget_runs(queue)
        # Read on from what is left; warn once for this gap.
        self.state.ids[self._state_key(queue)] = previous_id(oldest)

    def _read_once(self, client: Any) -> None:
        streams = {key: self.state.ids.get(self._state_key(q), "0-0")
                   for key, q in self._streams.items()}
        answer = client.xread(streams, count=self.read_count, block=self.block_ms)
        batch: list[tuple[str, list[tuple[str, dict[str, str]]]]] = [
            (self._streams[key], entries) for key, entries in (answer or [])
        ]
        rows: list[Row] = []
        rejected = 0
        entries = [Entry(queue, sid, fields) for queue, items in batch for sid, fields in items]
        hashes = self._job_hashes(client, entries)
        clients = self._list_clients(client, entries)
        for entry in entries:
            self.stats["entries"] += 1
            try:
                rows.extend(self.mapper.map(
                    entry, hashes.get((entry.queue, entry.fields.get("jobId", ""))), clients))
            except RecordError as exc:
                rejected += 1
                self._refuse(entry, str(exc))
            except Exception as exc:  # a shape not foreseen: refused, never a retry loop
                log.debug("bullmq: mapping failed", exc_info=True)
                rejected += 1
                self._refuse(entry, f"{type(exc).__name__}: {exc}")
        last_ids = {queue: items[-1][0] for queue, items in batch if items}
        for queue in self._streams.values():
            # A stream read to its end holds no `stalled` after a held `waiting`.
            read = sum(len(items) for q, items in batch if q == queue)
            if read < self.read_count:
                rows.extend(self.mapper.settle(queue))
        if rows or rejected:
            self._store(rows, rejected)
        if last_ids:
            for queue, sid in last_ids.items():
                held = self.mapper.held(queue)  # its row waits for the next entry
                self.state.ids[self._state_key(queue)] = previous_id(held) if held else sid
            self.state.save()

    def _job_hashes(
        self, client: Any, entries: list[Entry]
    ) -> dict[tuple[str, str], dict[str, str | None]]:
        wanted = sorted({(e.queue, e.fields["jobId"]) for e in entries
                         if e.fields.get("event") in NEEDS_HASH and e.fields.get("jobId")})
        if not wanted:
            return {}
        pipe = client.pipeline(transaction=False)
        for queue, job_id in wanted:
            pipe.hmget(f"{self.prefix}:{queue}:{job_id}", HASH_FIELDS)
        values = pipe.execute()
        return {ident: dict(zip(HASH_FIELDS, got, strict=True))
                for ident, got in zip(wanted, values, strict=True)}

    def _list_clients(self, client: Any, entries: list[Entry]) -> Clients | None:
        """The named worker connections now, when entries need them; None where CLIENT
        LIST is not allowed (then stalls are `stall or crash`)."""
        if not self.list_clients:
            return None
        if not any(e.fields.get("event") in ("active", "stalled") for e in entries):
            return None
        import redis

        try:
            return worker_connections(client, self.prefix)
        except redis.exceptions.ResponseError as exc:
            self.list_clients = False
            log.warning("bullmq: CLIENT LIST refused (%s): a stall and a crash cannot be "
                        "told apart, and are reported as `stall or crash`", exc)
            return None

    def _refuse(self, entry: Entry, why: str) -> None:
        self.stats["malformed"] += 1
        self._problems.warn(
            "malformed", "bullmq redis %s: queue %s, entry %s (%r) refused: %s",
            self.shown_url, entry.queue, entry.stream_id, entry.fields.get("event"), why,
        )

    def _store(self, rows: list[Row], rejected: int) -> None:
        """Make the rows durable, waiting while the store refuses them. Stopped before,
        the stream ids are not saved: the next start reads the entries again."""
        if not self._commit(rows, rejected):
            raise RuntimeError(f"stopping with {len(rows)} rows not stored")
        self.stats["rows"] += len(rows)

    def health(self) -> dict[str, Any]:
        """For /healthz: the Redis (no password), whether it is connected now, counts."""
        return {"redis": self.shown_url, "prefix": self.prefix,
                "connected": self.connected.is_set(), "list_clients": self.list_clients,
                **self.stats}

    def describe(self) -> str:
        return f"bullmq={self.shown_url}"


def worker_connections(client: Any, prefix: str) -> Clients:
    """The BullMQ worker connections open now (on Redis's clock), listed after the entries
    were read (so at or after each of them). Only those on the client's own database:
    CLIENT LIST spans the server, and apps on other databases may name their queues and
    workers alike."""
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    pipe = client.pipeline(transaction=False)
    pipe.time()
    pipe.client_list(_type="normal")
    (seconds, micros), listed = pipe.execute()
    ids: dict[str, set[str]] = {}
    for conn in listed:
        name = conn.get("name") or ""
        if name.startswith(f"{prefix}:") and ":w:" in name and str(conn.get("db")) == db:
            ids.setdefault(name, set()).add(str(conn.get("id")))
    return Clients(
        now_ms=int(seconds) * 1000 + int(micros) // 1000,
        ids_by_name={k: frozenset(v) for k, v in ids.items()},
    )


def stream_ids_path(tail_state: Path) -> Path:
    """The stream ids live beside the tail offsets: in the embedded store's folder."""
    return tail_state.with_name("bullmq-state.json")


def _id_order(stream_id: str) -> tuple[int, int]:
    try:
        return parse_stream_id(stream_id)
    except RecordError:
        return (0, 0)


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
