"""Where bodies are decoded: inline, or in worker processes so decoding uses a second core.

Turning protobuf into canonical rows is CPU-bound Python and holds the GIL; the receivers
and the writer need little CPU of their own. With `workers > 0` bodies go, as bytes, to a
pool of processes that each hold their own Normaliser, and Arrow tables come back.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import Normaliser
from collectors.service import bodies
from collectors.service.bodies import DecodeResult

log = logging.getLogger("dupescope.collect")
_worker_normaliser: Normaliser | None = None


class DecoderUnavailable(RuntimeError):
    """A decoding worker died (it is replaced); the sender should retry."""


def _init_worker(mapping: FieldMapping) -> None:
    global _worker_normaliser
    _worker_normaliser = Normaliser(mapping)


def _ready() -> bool:
    return _worker_normaliser is not None


def _decode_in_worker(signal: str, media: str, body: bytes, source: str) -> DecodeResult:
    assert _worker_normaliser is not None
    return bodies.decode(signal, media, body, _worker_normaliser, source)


class Decoder:
    """Decodes bodies with one mapping, in this process or in `workers` others."""

    def __init__(self, mapping: FieldMapping = DEFAULT_MAPPING, workers: int = 0) -> None:
        self.normaliser = Normaliser(mapping)
        self.mapping = mapping
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = self._start_pool() if workers > 0 else None

    def _start_pool(self) -> ProcessPoolExecutor:
        # forkserver: the collector runs threads, and forking a threaded process is unsafe.
        pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_init_worker,
            initargs=(self.mapping,),
        )
        # Start every worker now, not on the first request (an import takes a second).
        for future in [pool.submit(_ready) for _ in range(self.workers)]:
            future.result()
        return pool

    def _in_pool(self, function: Callable[..., DecodeResult], *args: Any) -> DecodeResult:
        pool = self._pool
        assert pool is not None
        try:
            return pool.submit(function, *args).result()
        except BrokenProcessPool as exc:
            # A worker died (killed, out of memory): replace the pool, keep serving.
            with self._lock:
                if self._pool is pool:
                    log.error("a decoding worker died; starting new workers")
                    pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._start_pool()
            raise DecoderUnavailable("decoding worker died") from exc

    def decode(self, signal: str, media: str, body: bytes, source: str) -> DecodeResult:
        """A body of one source (collectors/decoders), decoded here or in a worker."""
        if self._pool is None:
            return bodies.decode(signal, media, body, self.normaliser, source)
        return self._in_pool(_decode_in_worker, signal, media, body, source)

    def otlp(self, kind: str, body: bytes, fmt: str, source: str) -> DecodeResult:
        return self.decode(kind, fmt, body, source)

    def jsonlines(self, body: bytes, source: str) -> DecodeResult:
        return self.decode("lines", "ndjson", body, source)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
