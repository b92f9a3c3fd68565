"""Counting a Celery message's deliveries, which Celery itself does not.

Celery counts explicit retries (`request.retries`) but not redeliveries: a message that
comes back after a visibility timeout or a lost worker arrives with the same task id and
the same `retries`. Yet that delivery count is what tells a duplicate execution from a
retry. So the attempt is the largest of what each source knows:

- `retries + 1`: every retry is a new delivery;
- `retries + 2` when the transport flags the delivery as `redelivered` (AMQP does; kombu's
  Redis transport sets it when it restores an unacked message), which says "at least once
  before" but not how often;
- `retries + ApproximateReceiveCount` on SQS, whose count restarts with each retry's new
  message;
- a shared counter of deliveries per task id, kept in the result backend: the only source
  that counts every redelivery on every transport, across pool processes and hosts.

The counter needs a backend with an atomic increment (Redis, memcached, the in-memory
cache); elsewhere it falls back to a per-process count, which sees only the redeliveries
that land in the same process.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import timedelta
from threading import Lock
from typing import Any, Protocol

_log = logging.getLogger(__name__)
KEY_PREFIX = "dupescope-deliveries-"
DAY_S = 86_400


class DeliveryCounter(Protocol):
    def count(self, job_id: str) -> int | None:
        """Record one delivery of `job_id`; the deliveries so far, this one included.

        None when the count is unknown (the store is down): the attempt then rests on
        what Celery and the transport say.
        """
        ...

    def seen(self, job_id: str) -> int | None:
        """The deliveries of `job_id` so far, without counting one; None if unknown."""
        ...


class LocalCounter:
    """Deliveries seen by this process, bounded: the fallback without a shared store."""

    def __init__(self, size: int = 100_000) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._size = size
        self._lock = Lock()

    def count(self, job_id: str) -> int:
        with self._lock:
            n = self._seen.pop(job_id, 0) + 1
            self._seen[job_id] = n
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return n

    def seen(self, job_id: str) -> int | None:
        with self._lock:
            return self._seen.get(job_id)


class BackendCounter:
    """Deliveries per task id in the result backend, shared by every worker process."""

    def __init__(self, backend: Any, ttl_s: int = DAY_S) -> None:
        self.backend = backend
        self.ttl_s = ttl_s
        self._warned = False

    def count(self, job_id: str) -> int | None:
        key = f"{KEY_PREFIX}{job_id}"
        try:
            return self._increment(key)
        except Exception:
            if not self._warned:  # once: a backend outage must not flood the worker's log
                _log.warning(
                    "dupescope: cannot count deliveries in the result backend", exc_info=True
                )
                self._warned = True
            return None

    def seen(self, job_id: str) -> int | None:
        try:
            value = self.backend.get(f"{KEY_PREFIX}{job_id}")
            return int(value) if value is not None else None
        except Exception:
            return None

    def _increment(self, key: str) -> int:
        backend = self.backend
        try:
            n = backend.incr(key)  # Redis creates the key at 1; memcached answers None
        except KeyError:  # the in-memory cache raises for a missing key
            n = None
        if n is None:
            add = getattr(getattr(backend, "client", None), "add", None)
            if add is not None:
                # memcached: set-if-absent, so two first deliveries cannot both count 1.
                if add(key, "1", self.ttl_s):
                    return 1
                return int(backend.incr(key))
            backend.set(key, "1")
            return 1
        if int(n) == 1:
            backend.expire(key, self.ttl_s)
        return int(n)


def supports_counting(backend: Any) -> bool:
    """A backend with an atomic increment (the base class raises NotImplementedError)."""
    from celery.backends.base import KeyValueStoreBackend

    if not isinstance(backend, KeyValueStoreBackend):
        return False
    return type(backend).incr is not KeyValueStoreBackend.incr


def default_counter(app: Any) -> DeliveryCounter:
    """The shared counter where the app's result backend can hold it, else a local one."""
    backend = app.backend
    if supports_counting(backend):
        expires = app.conf.result_expires
        if isinstance(expires, timedelta):
            ttl = int(expires.total_seconds())
        else:
            ttl = int(expires or DAY_S)
        return BackendCounter(backend, ttl_s=max(ttl, DAY_S))
    return LocalCounter()


def _receive_count(request: Any) -> int | None:
    """SQS's ApproximateReceiveCount, which kombu keeps in the message properties."""
    properties = getattr(request, "properties", None) or {}
    info = properties.get("delivery_info") or {}
    value = ((info.get("sqs_message") or {}).get("Attributes") or {}).get("ApproximateReceiveCount")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def redelivered(request: Any) -> bool:
    info = getattr(request, "delivery_info", None) or {}
    return bool(info.get("redelivered"))


def delivery_attempt(request: Any, counted: int | None) -> int:
    """The delivery count of this execution, from every source that knows part of it."""
    retries = int(getattr(request, "retries", 0) or 0)
    attempt = retries + 1
    if redelivered(request):
        attempt = max(attempt, retries + 2)
    received = _receive_count(request)
    if received is not None:
        attempt = max(attempt, retries + received)
    if counted is not None:
        attempt = max(attempt, counted)
    return attempt
