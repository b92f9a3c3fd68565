"""Where bodies are decoded: inline, or in worker processes so decoding uses a second core.

Turning protobuf into canonical rows is CPU-bound Python and holds the GIL; the receivers
and the writer need little CPU of their own. With `workers > 0` bodies go, as bytes, to a
pool of processes that each hold their own Normaliser, and Arrow tables come back.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import Normaliser
from collectors.service import bodies
from collectors.service.bodies import DecodeResult

_worker_normaliser: Normaliser | None = None


def _init_worker(mapping: FieldMapping) -> None:
    global _worker_normaliser
    _worker_normaliser = Normaliser(mapping)


def _otlp_in_worker(kind: str, body: bytes, fmt: str, source: str) -> DecodeResult:
    assert _worker_normaliser is not None
    return bodies.decode_otlp(kind, body, fmt, _worker_normaliser, source)


def _lines_in_worker(body: bytes, source: str) -> DecodeResult:
    assert _worker_normaliser is not None
    return bodies.decode_jsonlines(body, _worker_normaliser, source)


class Decoder:
    """Decodes bodies with one mapping, in this process or in `workers` others."""

    def __init__(self, mapping: FieldMapping = DEFAULT_MAPPING, workers: int = 0) -> None:
        self.normaliser = Normaliser(mapping)
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        if workers > 0:
            # forkserver: the collector runs threads, and forking a threaded process is unsafe.
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_init_worker,
                initargs=(mapping,),
            )

    def otlp(self, kind: str, body: bytes, fmt: str, source: str) -> DecodeResult:
        if self._pool is None:
            return bodies.decode_otlp(kind, body, fmt, self.normaliser, source)
        return self._pool.submit(_otlp_in_worker, kind, body, fmt, source).result()

    def jsonlines(self, body: bytes, source: str) -> DecodeResult:
        if self._pool is None:
            return bodies.decode_jsonlines(body, self.normaliser, source)
        return self._pool.submit(_lines_in_worker, body, source).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
