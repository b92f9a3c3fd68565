"""`dupescope ingest`: JSON-lines logs, OTLP JSON Lines and Celery, RQ and arq worker logs
into a store.

The format is detected from content (an OTLP line holds resourceSpans/resourceLogs; a
Celery log starts with its banner or `[time: LEVEL/process]` lines; RQ's and arq's with
`HH:MM:SS` and their job lines, collectors/time_only_logs.py), so a folder of mixed
files needs no flags. Lines are decoded by the registry's decoder for `lines` in `ndjson`
(collectors/decoders): its bulk accelerator where one runs here, else the reference; a
Celery log by the reader of its decoder (`celery-log` in `text`), a Sidekiq log (told
first: its JSON format is JSON lines too) by its own (`sidekiq-log` in `text`), a
Dramatiq log (its `[ts] [PID n] ...` lines) by that of `dramatiq-log`. Rows
are written in bulk batches; a bad line is reported with file, line number and reason, and
the rest is kept.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import pyarrow as pa
import pyarrow.ipc

from collectors import ingest_pool
from collectors.arrow_batch import rows_to_table
from collectors.blocks import BlockResult
from collectors.celery_log import CeleryLogOptions
from collectors.decoders import REGISTRY, Decoder, GivesViews, Output
from collectors.jsonlines import Rejected
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.text_logs import TEXT_LOGS, TextLogReader, tell
from collectors.text_logs import reader as text_log_reader
from collectors.time_of_day import DayBasis
from collectors.time_only_logs import basis_for
from store.base import Store
from store.counts import distinct_events
from store.schema import empty_table

BLOCK_BYTES = ingest_pool.BLOCK_BYTES
try:  # ISA-L inflates in under half the time zlib takes (this process inflates for the pool)
    from isal.igzip import GzipFile as _GzipFile
except ImportError:  # a platform without its wheel
    _GzipFile = gzip.GzipFile  # type: ignore[misc,assignment]
#: A Celery log's read: its lines become Python objects first (about 20 times their size).
CELERY_BLOCK_BYTES = 8 << 20
#: How much of a file's start is looked at to tell its format.
SNIFF_BYTES = 64 << 10
#: The input formats: `auto` tells them apart from content; `json-lines` is JSON lines and
#: OTLP JSON Lines, told apart line by line.
FORMATS = ("auto", "json-lines", *TEXT_LOGS)


@dataclass
class IngestReport:
    """What an ingest did: counts for the closing summary, and every rejected record."""

    files: int = 0
    lines: int = 0
    rows: int = 0
    ignored: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    #: Of `rows`, how many the store held already (a file loaded again) or that repeated
    #: another row of the same load: stored, and collapsed by every reader. None: not
    #: counted.
    already_stored: int | None = None

    def summary(self) -> str:
        said = (
            f"{self.rows} events stored from {self.files} file(s), {self.lines} lines; "
            f"{len(self.rejected)} rejected, {self.ignored} ignored (spans or log lines that "
            "are no lifecycle step)"
        )
        if self.already_stored is not None and self.rows:
            new = self.rows - self.already_stored
            said += (f"; {new} new, {self.already_stored} already stored (a repeat changes "
                     "no answer)")
        return said


def _open(path: str) -> tuple[BinaryIO, int | None]:
    """A binary stream and its size in bytes (for progress), transparently gunzipped."""
    if path == "-":
        return sys.stdin.buffer, None
    handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by the caller
    size = Path(path).stat().st_size
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return _GzipFile(fileobj=handle), size  # type: ignore[return-value]
    handle.seek(0)
    return handle, size


def _blocks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Reads of about `size` bytes, each ending at a line end."""
    while True:
        block = stream.read(size)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += stream.readline()
        yield block


def _spans(stream: BinaryIO, size: int, total: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of blocks of about `size` bytes of a `total`-byte file, each
    ending at a line end.

    Only the bytes around each boundary are read here: the workers read the blocks.
    """
    offset = stream.tell()
    while offset < total:
        end = offset + size
        if end < total:
            stream.seek(end)
            end += len(stream.readline())
        yield offset, min(end, total) - offset
        offset = end


def _even_block_bytes(total: int, size: int, workers: int) -> int:
    """A block size of at most `size` that cuts `total` bytes into a multiple of `workers`
    blocks of about equal size: with seven blocks on two workers, one worker would decode
    the last block alone while the other waits."""
    blocks = -(-total // size)
    blocks = -(-blocks // workers) * workers
    return max(-(-total // blocks), 1)


def lines_decoder(*, views: bool = False) -> Decoder:
    """The registry's decoder for blocks of lines: the bulk accelerator that runs here, else
    the reference; one giving text as views (no copy) for a store that writes them."""
    decoder = REGISTRY.serving("lines", "ndjson", bulk=True)
    return decoder.with_views() if views and isinstance(decoder, GivesViews) else decoder


def _result(output: Output) -> BlockResult:
    return BlockResult(output.table, output.rejected, output.ignored, output.lines)


def _line_count(block: bytes) -> int:
    return block.count(b"\n") + (0 if block.endswith(b"\n") else 1)


class SegmentWriter(Protocol):
    """A store's write, runnable in a worker process (see `EmbeddedStore.segment_writer`)."""

    def write(self, table: pa.Table) -> int: ...


@dataclass
class _Spooled:
    """A block decoded in a worker: its rows stored or in an Arrow IPC file, the rest inline.

    Where the store can be written from a worker (the embedded store's segments), the
    worker writes the rows itself and only counts come back. Otherwise they go through a
    file in memory (/dev/shm where there is one) that this process maps, so a block's
    table is written once and never pickled. Line numbers in `result.rejected` count from
    the block's first line, 1: this process knows where the block starts in the file and
    renumbers them.
    """

    rows_file: str | None
    result: BlockResult
    stored: int = 0


_worker: tuple[Decoder, Normaliser] | None = None
_writer: SegmentWriter | None = None


def _start_worker(
    decoder: Decoder, mapping: FieldMapping, writer: SegmentWriter | None = None
) -> None:
    global _worker, _writer
    _worker = (decoder, Normaliser(mapping))
    _writer = writer


_buffer = io.BytesIO()


def _read_block(path: str, offset: int, length: int) -> bytes:
    """`length` bytes of a file from `offset`, read into the same memory block after block.

    A fresh 64 MB `bytes` costs a page fault for each of its pages on every block (0.3 µs
    an event, as much as hashing the line). A BytesIO hands out its own buffer as `bytes`
    without a copy, and takes it back for the next read once nothing else refers to it (it
    copies it first if something still does, so a block once handed out never changes).
    """
    if _buffer.seek(0, io.SEEK_END) < length:
        _buffer.seek(length - 1)
        _buffer.write(b"\0")
    _buffer.truncate(length)
    with open(path, "rb") as handle, _buffer.getbuffer() as view:
        handle.seek(offset)
        filled = 0
        while filled < length:
            got = handle.readinto(view[filled:])
            if not got:
                raise OSError(f"{path} ended {length - filled} bytes before the block's end")
            filled += got
    return _buffer.getvalue()


def _decode_in_worker(
    path: str, offset: int, length: int, source: str, spool: str | None
) -> _Spooled:
    """Read one block of a file, decode it and store or spool its rows (in a worker)."""
    assert _worker is not None
    decoder, normaliser = _worker
    block = _read_block(path, offset, length)
    result = _result(decoder.decode(block, normaliser, source))
    del block  # so the next block's read can take the buffer back
    table, result.table = result.table, empty_table()
    if _writer is not None:
        return _Spooled(None, result, _writer.write(table) if table.num_rows else 0)
    assert spool is not None
    rows_file = os.path.join(spool, f"{os.path.basename(path)}-{offset}.arrow")
    with pa.OSFile(rows_file, "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)
    return _Spooled(rows_file, result)


def _unspool(spooled: _Spooled, first_line: int, source: str) -> BlockResult:
    """The worker's result with its rows mapped back in and its line numbers made absolute."""
    result = spooled.result
    result.stored = spooled.stored
    if spooled.rows_file is not None:
        with pa.memory_map(spooled.rows_file) as source_file:
            result.table = pa.ipc.open_file(source_file).read_all()
        os.unlink(spooled.rows_file)  # the mapping keeps the pages until the table goes
    return _numbered_from(result, first_line, source)


def _numbered_from(result: BlockResult, first_line: int, source: str) -> BlockResult:
    """A block's result with its line numbers (counted from the block's start, 1) made
    absolute: a body is decoded on its own, and only the file knows where it starts."""
    if first_line == 1:
        return result
    prefix = f"{source}:"
    result.rejected = [
        Rejected(f"{prefix}{int(r.where.removeprefix(prefix)) + first_line - 1}", r.reason)
        for r in result.rejected
    ]
    return result


def _workers() -> int:
    return ingest_pool.cores()


def _spool_dir(workers: int) -> str:
    """Where workers leave decoded rows: memory (/dev/shm) when it has room for the blocks
    in flight, else the temporary directory (a container's /dev/shm is often 64 MB)."""
    shm = Path("/dev/shm")
    room = (workers + 2) * 2 * BLOCK_BYTES  # a block's rows take about as much as its text
    fits = shm.is_dir() and shutil.disk_usage(shm).free > room
    return tempfile.mkdtemp(prefix="dupescope-ingest-", dir=shm if fits else None)


def ingest_files(
    paths: list[str],
    store: Store,
    normaliser: Normaliser | None = None,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_rejected: Callable[[Rejected], None] | None = None,
    fmt: str = "auto",
    celery: CeleryLogOptions | None = None,
    fork_workers: bool = False,
    day: DayBasis | None = None,
) -> IngestReport:
    """Read every file, write rows in bulk; `on_progress` receives bytes consumed.

    `fmt` is one of FORMATS; `celery` says what Celery logs do not (see celery_log.py),
    `day` the date of RQ's and arq's time-only lines (`--date`; else each file's
    modification time, see time_of_day.py).
    A Celery log is read in order, block by block, by one reader that keeps what later
    lines need (which run a line ends).

    Blocks of a large file are read and decoded in worker processes (one per core); a
    gzip file is inflated here, block by block, for the workers to decode. Where the store
    gives a `segment_writer` (the embedded store), each worker also writes its blocks'
    segments; otherwise this process writes them while the workers decode the next ones.
    Other inputs (stdin, small files) are decoded here, block by block.

    `fork_workers`: this process has run no polars computation yet (a command's own, fresh
    process), so the workers are forked from it before it decodes anything, and start with
    every module imported; otherwise they come from a fork server (see `ingest_pool`).
    """
    normaliser = normaliser or Normaliser()
    mapping = normaliser.mapping
    held = distinct_events(store)
    # A store that writes segments itself takes rows as string views (no copy of the text).
    segmented = store.segmented()
    decoder = lines_decoder(views=segmented is not None)
    report = IngestReport()
    pool: ProcessPoolExecutor | None = None
    spool: str | None = None

    def start_pool(fork: bool) -> tuple[ProcessPoolExecutor, str]:
        started = ProcessPoolExecutor(
            max_workers=_workers(),
            mp_context=ingest_pool.context(fork=fork),
            initializer=_start_worker,
            initargs=(decoder, mapping, segmented.segment_writer() if segmented else None),
        )
        if fork:
            started.submit(os.getpid).result()  # every worker is forked now, before any decode
        return started, _spool_dir(_workers())

    wanted = fmt not in TEXT_LOGS and ingest_pool.wanted(
        paths, block_bytes=BLOCK_BYTES
    )
    if fork_workers and wanted and _workers() > 1:
        pool, spool = start_pool(fork=True)

    def record(result: BlockResult, reached: int) -> None:
        _record(result, store, report, on_rejected)
        if on_progress:
            on_progress(reached)

    try:
        for path in paths:
            stream, size = _open(path)
            source = "stdin" if path == "-" else path
            report.files += 1
            plain = isinstance(stream, io.BufferedReader) and path != "-"
            large = ingest_pool.large(size or 0, compressed=not plain, block_bytes=BLOCK_BYTES)
            try:
                told = tell(_head(stream), celery) if fmt == "auto" else fmt
                if told in TEXT_LOGS:
                    dated = basis_for(path, day) if path != "-" else day or DayBasis()
                    text = text_log_reader(told, normaliser, source, celery=celery, day=dated)
                    _read_text_log(stream, text, source, path, record)
                    continue
                if large and path != "-" and _workers() > 1:
                    if pool is None:
                        pool, spool = start_pool(fork=False)
                    rows_spool = None if segmented is not None else spool
                    assert size is not None and spool is not None
                    if plain:
                        _in_workers(pool, rows_spool, path, stream, size, record)
                    else:
                        _inflated_in_workers(pool, rows_spool, spool, path, stream, record)
                    continue
                position = _position_reader(stream, path)
                first_line = 1
                for block in _blocks(stream, BLOCK_BYTES):
                    result = _result(decoder.decode(block, normaliser, source))
                    record(_numbered_from(result, first_line, source), position())
                    first_line += result.lines
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if spool is not None:
            shutil.rmtree(spool, ignore_errors=True)
    if report.rows:
        report.already_stored = report.rows - (distinct_events(store) - held)
    return report


def _head(stream: BinaryIO) -> bytes:
    """The first bytes of a stream, left to be read (stdin and gzip streams included)."""
    peek = getattr(stream, "peek", None)
    return peek(SNIFF_BYTES)[:SNIFF_BYTES] if peek is not None else b""


def _read_text_log(
    stream: BinaryIO,
    reader: TextLogReader,
    source: str,
    path: str,
    record: Callable[[BlockResult, int], None],
) -> None:
    position = _position_reader(stream, path)
    first_line = 1
    for block in _blocks(stream, CELERY_BLOCK_BYTES):
        decoded = reader.decode(block, first_line, source)
        lines = _line_count(block)
        result = BlockResult(
            table=rows_to_table(decoded.rows),
            rejected=decoded.rejected,
            ignored=decoded.ignored,
            lines=lines,
            per_line=lines,
        )
        record(result, position())
        first_line += lines


def _in_workers(
    pool: ProcessPoolExecutor,
    spool: str | None,
    path: str,
    stream: BinaryIO,
    size: int,
    record: Callable[[BlockResult, int], None],
) -> None:
    """One file's blocks, decoded by the pool; `record` gets them in file order."""
    pending: deque[tuple[Future[_Spooled], int]] = deque()
    first_line = 1

    def settle() -> None:
        nonlocal first_line
        job, reached = pending.popleft()
        result = _unspool(job.result(), first_line, path)
        first_line += result.lines
        record(result, reached)

    for offset, length in _spans(stream, _even_block_bytes(size, BLOCK_BYTES, _workers()), size):
        job = pool.submit(_decode_in_worker, path, offset, length, path, spool)
        pending.append((job, offset + length))
        while len(pending) > _workers():
            settle()
    while pending:
        settle()


def _inflated_in_workers(
    pool: ProcessPoolExecutor,
    rows_spool: str | None,
    spool: str,
    path: str,
    stream: BinaryIO,
    record: Callable[[BlockResult, int], None],
) -> None:
    """A compressed file's blocks, inflated here and decoded by the pool, in file order.

    Each inflated block goes to a file in memory (/dev/shm where there is room) that its
    worker reads as it reads a block of a plain file; inflating the next block here
    overlaps with decoding the last ones there.
    """
    position = _position_reader(stream, path)
    pending: deque[tuple[Future[_Spooled], int, str]] = deque()
    first_line = 1

    def settle() -> None:
        nonlocal first_line
        job, reached, block_file = pending.popleft()
        try:
            result = _unspool(job.result(), first_line, path)
        finally:
            os.unlink(block_file)
        first_line += result.lines
        record(result, reached)

    try:
        for number, block in enumerate(_blocks(stream, BLOCK_BYTES)):
            block_file = os.path.join(spool, f"block-{number}.jsonl")
            with open(block_file, "wb") as out:
                out.write(block)
            job = pool.submit(_decode_in_worker, block_file, 0, len(block), path, rows_spool)
            del block
            pending.append((job, position(), block_file))
            while len(pending) > _workers():
                settle()
        while pending:
            settle()
    finally:
        for _, _, block_file in pending:
            if os.path.exists(block_file):
                os.unlink(block_file)


def _record(
    result: BlockResult,
    store: Store,
    report: IngestReport,
    on_rejected: Callable[[Rejected], None] | None,
) -> None:
    report.lines += result.lines
    report.rows += result.stored
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
