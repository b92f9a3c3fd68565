"""Hot segments: the collector's small, frequent writes, kept as Arrow IPC streams.

A collector commits a group of batches every few milliseconds, and its background
compaction rewrites those small segments into one per day. Encoding them as Parquet took
most of the writer's time (about 2 µs a row against 0.3 for Arrow IPC), so they are
written as Arrow IPC streams (`<id>.arrow`, uncompressed) beside the Parquet segments, and
compaction turns them into Parquet with the rest of their day. Readers map them into
memory: an IPC stream is read without decoding, and a mapped file stays readable after
compaction has moved it away. Hot segments written before streams, as Arrow IPC files
(which begin with `ARROW1`), are read as well.

Rows of spans with lifecycle steps arrive run-end encoded (`store.schema.RUNS_SCHEMA`)
and are written so: a span's job id, trace id, attributes and the rest are stored once
for its four or so rows, less than half the bytes to copy and fsync. Readers expand them.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import uuid
from collections import deque
from pathlib import Path

import pyarrow as pa

from store.schema import as_events

SUFFIX = ".arrow"
#: How an Arrow IPC file (the format of hot segments written before streams) begins.
FILE_MAGIC = b"ARROW1"
#: What direct I/O needs aligned: the memory written from, the length and the offset.
ALIGN = max(4096, mmap.PAGESIZE)
#: Scratch memory a writing thread keeps between writes, the largest file written direct.
KEEP_SCRATCH = 8 << 20
STREAM_BUFFER = 1 << 20
O_DIRECT = getattr(os, "O_DIRECT", 0)  # Linux and some BSDs
_direct = {"refused": O_DIRECT == 0}  # a file system refused it once: not asked again
_scratch = threading.local()


def is_hot(path: str | Path) -> bool:
    return str(path).endswith(SUFFIX)


def write_ipc(table: pa.Table, path: Path) -> None:
    """`table` (in EVENTS_SCHEMA or RUNS_SCHEMA) as an Arrow IPC stream at `path`; the
    caller makes it durable and places it.

    A stream that fits the writer's scratch memory is encoded there, page-aligned, and
    written in one call with direct I/O (`O_DIRECT`) where the file system takes it: the
    disk reads the bytes from that memory, where a buffered write had the kernel copy them
    into its page cache first, which took a third of the collector writer's CPU. Direct
    I/O writes whole blocks, so the file ends in up to a block of zeros after the stream's
    end marker, where readers stop. (An IPC file must end with its footer: cutting it to
    size made the system read its last block back from disk and write it again, ~8% of a
    group commit.) The fsync that follows is needed either way. A larger stream (a group
    commit under overload) is written through a small buffer instead, so that it costs no
    memory of its size.
    """
    bound = encoded_bound(table)
    if bound <= KEEP_SCRATCH:
        scratch = scratch_of(bound)
        try:
            size = encode_into(table, scratch)
        except OSError:  # more metadata than the bound allowed for
            pass
        else:
            with memoryview(scratch) as data:
                _write_file(path, data, size)
            return
    _write_streamed(table, path)


def _write_streamed(table: pa.Table, path: Path) -> None:
    """Through a 1 MB buffer: written straight to the file, each of the ~60 buffers of a
    batch was a system call of its own, twice the CPU of the copy."""
    file = pa.OSFile(str(path), "wb")
    with pa.BufferedOutputStream(file, buffer_size=STREAM_BUFFER) as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)


def encode_into(table: pa.Table, scratch: mmap.mmap, offset: int = 0) -> int:
    """The IPC stream's bytes at `offset` in `scratch`, and their count."""
    sink = pa.FixedSizeBufferWriter(pa.py_buffer(memoryview(scratch)[offset:]))
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return int(sink.tell())


def encoded_bound(table: pa.Table) -> int:
    """What `table` takes at most as an IPC stream, but for unusual metadata (`encode_into`
    raises OSError where that does not fit): its buffers, plus metadata and padding."""
    return int(table.nbytes + 65536 + 4096 * max(1, table.column(0).num_chunks))


def aligned(size: int) -> int:
    """`size` rounded up to whole blocks of ALIGN."""
    return -(-size // ALIGN) * ALIGN


def scratch_of(size: int) -> mmap.mmap:
    """This thread's scratch memory (anonymous, so page-aligned), of at least `size`
    bytes: kept and reused, since mapping fresh memory makes every page fault in again."""
    kept = getattr(_scratch, "memory", None)
    if kept is None or len(kept) < size:
        kept = _scratch.memory = mmap.mmap(-1, max(aligned(size), 1 << 20))
    return kept


def direct_refused() -> bool:
    """Whether this process writes buffered: a file system refused direct I/O once."""
    return _direct["refused"]


def refuse_direct() -> None:
    _direct["refused"] = True


def _write_file(path: Path, data: memoryview, size: int) -> None:
    """The first `size` bytes of `data` (page-aligned, at least `size` aligned up) as the
    file `path`: with direct I/O, whole blocks, zeros after the first `size` bytes, where
    it is taken; else exactly `size` bytes.

    A file system that refuses to open a file for direct I/O, or to write its first
    block so, is not asked again by this process; any other failure of a direct write
    (one cut short, say) writes this file again buffered, and the next one direct.
    """
    if not _direct["refused"]:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_DIRECT, 0o644)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            _direct["refused"] = True
        else:
            try:
                blocks = aligned(size)
                data[size:blocks] = bytes(blocks - size)  # not what an earlier write left
                written = _write_all(fd, data[:blocks])
                if written is None:
                    return
                if written == 0:  # not even the first block: direct I/O is not for here
                    _direct["refused"] = True
            finally:
                os.close(fd)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if _write_all(fd, data[:size]) is not None:
            raise OSError(errno.EIO, f"could not write {path}")
    finally:
        os.close(fd)


def _write_all(fd: int, data: memoryview) -> int | None:
    """None once all of `data` is written; else how much was, when a write wrote nothing
    or failed with EINVAL (as a misaligned direct write does). Other errors raise."""
    written = 0
    while written < len(data):
        try:
            done = os.write(fd, data[written:])
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            return written
        if done == 0:
            return written
        written += done
    return None


def read_ipc(path: str | Path) -> pa.Table:
    """A hot segment's rows in EVENTS_SCHEMA: mapped rather than copied, but for columns
    stored as runs, which are expanded. An IPC stream, or an IPC file from before."""
    with pa.memory_map(str(path)) as source:
        is_file = source.read(len(FILE_MAGIC)) == FILE_MAGIC
        source.seek(0)
        reader = pa.ipc.open_file(source) if is_file else pa.ipc.open_stream(source)
        return as_events(reader.read_all())


class SpareFiles:
    """Empty files made ahead of time, so that a hot write never waits for a new inode.

    Creating a file costs far more than writing one on some file systems (0.6 ms of CPU on
    the machine the collector's figures come from, a tenth of a whole group commit), so a
    background thread keeps `keep` empty files in `<events>/.spare/`, and a hot write moves
    one into its day folder and fills it. Spares left by an earlier process are used too.
    """

    def __init__(self, folder: Path, keep: int = 8) -> None:
        self.folder = folder
        self.keep = keep
        self._ready: deque[Path] = deque()
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._name = uuid.uuid4().hex[:16]  # this process's spares: a count after it
        self._made = 0

    def take(self) -> Path | None:
        """A spare file's path (the caller renames it away), or None when none is ready.

        The thread is woken once half the spares are used, to make the rest in one go: woken
        for every file, it took the writer's core and interpreter lock once a group commit.
        """
        with self._lock:
            if self._thread is None:
                self._start()
            spare = self._ready.popleft() if self._ready else None
            low = len(self._ready) <= self.keep // 2
        if low:
            self._wanted.set()
        return spare

    def close(self) -> None:
        self._closed = True
        self._wanted.set()

    def _start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._ready.extend(p for p in sorted(self.folder.iterdir()) if p.is_file())
        self._thread = threading.Thread(target=self._fill, name="dupescope-spares", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        while not self._closed:
            self._wanted.wait()
            self._wanted.clear()
            while not self._closed and len(self._ready) < self.keep:
                self._made += 1
                path = self.folder / f"{self._name}-{self._made}"
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                except OSError:
                    break  # a full disk: writes create their own files, as without spares
                with self._lock:
                    self._ready.append(path)
