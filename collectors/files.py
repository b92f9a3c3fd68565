"""`dupescope ingest`: JSON-lines logs and OTLP JSON Lines files into a store.

The format is detected from content (an OTLP line holds resourceSpans/resourceLogs), so a
folder of mixed files needs no flags. Rows are written in bulk batches; a bad line is
reported with file, line number and reason, and the rest is kept.
"""

from __future__ import annotations

import gzip
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from collectors.blocks import BlockDecoder, BlockResult
from collectors.jsonlines import Decoded, Rejected, decode_lines
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.otlp_lines import decode_otlp_lines, is_otlp_line
from store.base import Store

BLOCK_BYTES = 64 << 20  # one polars read; about 150k lines of 400 bytes


@dataclass
class IngestReport:
    """What an ingest did: counts for the closing summary, and every rejected record."""

    files: int = 0
    lines: int = 0
    rows: int = 0
    ignored: int = 0
    rejected: list[Rejected] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.rows} events stored from {self.files} file(s), {self.lines} lines; "
            f"{len(self.rejected)} rejected, {self.ignored} spans ignored (no lifecycle step)"
        )


def _open(path: str) -> tuple[BinaryIO, int | None]:
    """A binary stream and its size in bytes (for progress), transparently gunzipped."""
    if path == "-":
        return sys.stdin.buffer, None
    handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by the caller
    size = Path(path).stat().st_size
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return gzip.GzipFile(fileobj=handle), size  # type: ignore[return-value]
    handle.seek(0)
    return handle, size


def decode_batch(lines: list[tuple[int, bytes]], normaliser: Normaliser, source: str) -> Decoded:
    """Lines of either format, told apart line by line (the per-record reference path)."""
    otlp = [(n, line) for n, line in lines if is_otlp_line(line)]
    if not otlp:
        return decode_lines(lines, normaliser, source)
    plain = [(n, line) for n, line in lines if not is_otlp_line(line)]
    out = decode_otlp_lines(otlp, normaliser, source)
    rest = decode_lines(plain, normaliser, source)
    out.rows.extend(rest.rows)
    out.rejected.extend(rest.rejected)
    out.rejected.sort(key=lambda r: r.where)
    return out


def _blocks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Reads of about `size` bytes, each ending at a line end."""
    while True:
        block = stream.read(size)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += stream.readline()
        yield block


def _line_count(block: bytes) -> int:
    return block.count(b"\n") + (0 if block.endswith(b"\n") else 1)


_worker: BlockDecoder | None = None


def _start_worker(mapping: FieldMapping) -> None:
    global _worker
    _worker = BlockDecoder(mapping)


def _decode_in_worker(block: bytes, first_line: int, source: str) -> BlockResult:
    assert _worker is not None
    return _worker.decode(block, first_line, source)


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ingest_files(
    paths: list[str],
    store: Store,
    normaliser: Normaliser | None = None,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_rejected: Callable[[Rejected], None] | None = None,
) -> IngestReport:
    """Read every file, write rows in bulk; `on_progress` receives bytes consumed.

    Blocks of a large file are decoded in worker processes (one per core) while this
    process writes the previous ones, so decoding and writing overlap.
    """
    mapping = (normaliser or Normaliser()).mapping
    decoder = BlockDecoder(mapping)
    report = IngestReport()
    pool: ProcessPoolExecutor | None = None
    try:
        for path in paths:
            stream, size = _open(path)
            source = "stdin" if path == "-" else path
            report.files += 1
            position = _position_reader(stream, path)
            if pool is None and size and size > 2 * BLOCK_BYTES and _workers() > 1:
                # One polars thread per worker: the workers already fill the cores.
                os.environ.setdefault("POLARS_MAX_THREADS", "1")
                pool = ProcessPoolExecutor(
                    max_workers=_workers(),
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(mapping,),
                )
            pending: deque[tuple[Future[BlockResult] | BlockResult, int]] = deque()

            def settle(item: tuple[Future[BlockResult] | BlockResult, int]) -> None:
                outcome, reached = item
                result = outcome.result() if isinstance(outcome, Future) else outcome
                _record(result, store, report, on_rejected)
                if on_progress:
                    on_progress(reached)

            try:
                first_line = 1
                for block in _blocks(stream, BLOCK_BYTES):
                    if pool is not None:
                        job = pool.submit(_decode_in_worker, block, first_line, source)
                        pending.append((job, position()))
                        while len(pending) > _workers():
                            settle(pending.popleft())
                    else:
                        settle((decoder.decode(block, first_line, source), position()))
                    first_line += _line_count(block)
                while pending:
                    settle(pending.popleft())
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return report


def _record(
    result: BlockResult,
    store: Store,
    report: IngestReport,
    on_rejected: Callable[[Rejected], None] | None,
) -> None:
    report.lines += result.lines
    if result.table.num_rows:
        report.rows += store.write(result.table)
    report.ignored += result.ignored
    report.rejected.extend(result.rejected)
    if on_rejected:
        for rejected in result.rejected:
            on_rejected(rejected)


def _position_reader(stream: BinaryIO, path: str) -> Callable[[], int]:
    """How far into the file (compressed bytes for .gz) reading has come."""
    if path == "-":
        return lambda: 0
    underlying = getattr(stream, "fileobj", None) or stream
    return lambda: underlying.tell()
