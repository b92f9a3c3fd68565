"""Hot logs: many group commits appended to one file, instead of a file per commit.

A collector commits every few milliseconds. As a file of its own, each commit cost a file
creation, a rename and an fsync of its day folder beside the write and its fsync: on the
development machine the collector sent 1.09-1.11x as many spans a second appending every
commit to a log as with a file per commit (switched every second inside one run). So a
collector appends its commits to a hot log, `<id>.arrowlog` in the day folder, one frame
per commit:

    offset 0   b"DSHOTLG1"                      magic
    offset 8   payload length                   uint64, little-endian
    offset 16  CRC-32C of the payload           uint32
    offset 20  CRC-32C of bytes 0-19            uint32
    offset 64  payload: an Arrow IPC stream (EVENTS_SCHEMA or RUNS_SCHEMA)
    zeros up to the next multiple of 4096, where the next frame begins

A frame is durable (`fdatasync`) before its commit is acknowledged. A reader takes the
frames up to the file's size and stops at the first whose magic or checksums do not
hold: the tail of a commit a crash cut short, which was never acknowledged. The writer
never appends to a log after a failed write, nor to a log of an earlier process, so only
a log's last frame can be cut short.

A log is open while its writer holds an exclusive `flock` on it; compaction takes only
logs nobody holds (a log of a collector that died is free). The writer closes a log once
it holds LOG_BYTES or LOG_FRAMES, when its store compacts, and when it closes; the next
commit starts a new one, from a spare file (`hot_segments.SpareFiles`) where one is ready.
A commit too large for the writer's scratch memory is written as a hot segment of its own
(`hot_segments.write_ipc`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from store import hot_segments
from store.durable import fsync_dir, temporary_for
from store.schema import as_events, empty_table


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of `data`; the package is imported on first use, as its import reads its
    own metadata (20 ms of every `dupescope` command, most of which never reads a log)."""
    from crc32c import crc32c as checksum

    return int(checksum(data))


LOG_SUFFIX = ".arrowlog"
MAGIC = b"DSHOTLG1"
HEADER = 64
_HEAD = struct.Struct("<8sQI")  # magic, payload length, payload CRC; then the header's CRC
#: A log is closed once it holds this much, or this many frames (a reader maps every
#: frame as a table of its own).
LOG_BYTES = 32 << 20
LOG_FRAMES = 1024


def is_log(path: str | Path) -> bool:
    return str(path).endswith(LOG_SUFFIX)


def is_hot(path: str | Path) -> bool:
    """A hot segment or a hot log: data compaction has not turned into Parquet yet."""
    return is_log(path) or hot_segments.is_hot(path)


# ---- reading -------------------------------------------------------------------------


def _frames(data: memoryview, start: int) -> Iterator[tuple[int, int]]:
    """(payload offset, payload length) of each whole frame from `start` on."""
    offset = start
    while offset + HEADER <= len(data):
        magic, length, crc = _HEAD.unpack_from(data, offset)
        (head_crc,) = struct.unpack_from("<I", data, offset + _HEAD.size)
        if magic != MAGIC or crc32c(data[offset : offset + _HEAD.size]) != head_crc:
            return
        payload = offset + HEADER
        if payload + length > len(data) or crc32c(data[payload : payload + length]) != crc:
            return
        yield payload, length
        offset = hot_segments.aligned(payload + length)


def read_log(path: str | Path, start: int = 0) -> tuple[list[pa.Table], int]:
    """The rows of a log's whole frames from byte `start` on (EVENTS_SCHEMA, mapped
    rather than copied, but for columns stored as runs), and where the next frame would
    begin."""
    tables: list[pa.Table] = []
    end = start
    with pa.memory_map(str(path)) as source:
        if source.size() <= start:
            return tables, end
        buffer = source.read_buffer()
        with memoryview(buffer) as data:
            for payload, length in _frames(data, start):
                stream = pa.ipc.open_stream(buffer.slice(payload, length))
                tables.append(as_events(stream.read_all()))
                end = hot_segments.aligned(payload + length)
    return tables, end


def frame_count(path: str | Path) -> int:
    """How many whole frames a log holds (checksums verified)."""
    with pa.memory_map(str(path)) as source:
        if source.size() == 0:
            return 0
        with memoryview(source.read_buffer()) as data:
            return sum(1 for _ in _frames(data, 0))


def read_hot(path: str | Path) -> pa.Table:
    """A hot segment's or a hot log's rows in EVENTS_SCHEMA."""
    if not is_log(path):
        return hot_segments.read_ipc(path)
    tables, _ = read_log(path)
    return pa.concat_tables(tables) if tables else empty_table()


def is_open(path: str | Path) -> bool:
    """Whether a writer holds the log (it may append to it still)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the lock taken
    return False


@dataclass
class _Mapped:
    """What a reader took of one hot file: its tables, and for a log how far it read."""

    tables: list[pa.Table]
    end: int = 0
    size: int = 0


class HotTables:
    """The mapped tables of the hot segments and logs a reader listed, each read once.

    Hot segments are immutable, so a table read for one listing serves every later
    listing that still names it. A log grows: its new frames, and only those, are read
    when its size has changed. Those no longer listed (compacted) are let go.
    """

    def __init__(self) -> None:
        self._files: dict[str, _Mapped] = {}

    def table(self, paths: list[str]) -> pa.Table:
        """Every listed hot file's rows as one table (FileNotFoundError if one went)."""
        opened = {p: self._read(p, self._files.get(p)) for p in paths}
        self._files = opened
        tables = [t for m in opened.values() for t in m.tables if t.num_rows]
        if not tables:
            return empty_table()
        return pa.concat_tables(tables)

    @staticmethod
    def _read(path: str, before: _Mapped | None) -> _Mapped:
        if not is_log(path):
            return before or _Mapped([hot_segments.read_ipc(path)])
        size = os.stat(path).st_size
        if before is not None and before.size == size:
            return before
        start, tables = (before.end, before.tables) if before is not None else (0, [])
        more, end = read_log(path, start)
        return _Mapped(tables + more, end, size)

    def clear(self) -> None:
        self._files = {}


def sizes(paths: list[str]) -> tuple[int, ...]:
    """The sizes of the logs among `paths`, which change as they grow (0 for one gone)."""
    found = []
    for path in paths:
        if is_log(path):
            try:
                found.append(os.stat(path).st_size)
            except FileNotFoundError:
                found.append(0)
    return tuple(found)


# ---- writing -------------------------------------------------------------------------


@dataclass
class _Log:
    path: Path
    fd: int
    end: int = 0
    frames: int = 0


class HotLogs:
    """A writer's open hot logs, one per day folder it writes to."""

    def __init__(self, spares: hot_segments.SpareFiles | None = None) -> None:
        self.spares = spares
        self._open: dict[Path, _Log] = {}
        self._lock = threading.Lock()

    def append(self, folder: Path, table: pa.Table, name: str) -> Path | None:
        """`table` as the next frame of `folder`'s log (a new one named `name` if none is
        open), durable on return: the log's path. None, writing nothing, when the table is
        too large for the scratch memory and should be a hot segment of its own."""
        bound = HEADER + hot_segments.encoded_bound(table)
        if bound > hot_segments.KEEP_SCRATCH:
            return None
        scratch = hot_segments.scratch_of(bound)
        try:
            size = hot_segments.encode_into(table, scratch, HEADER)
        except OSError:  # more metadata than the bound allowed for
            return None
        with memoryview(scratch) as data:
            frame = hot_segments.aligned(HEADER + size)
            head = _HEAD.pack(MAGIC, size, crc32c(data[HEADER : HEADER + size]))
            data[: _HEAD.size] = head
            data[_HEAD.size : HEADER] = struct.pack("<I", crc32c(head)).ljust(
                HEADER - _HEAD.size, b"\0"
            )
            data[HEADER + size : frame] = bytes(frame - HEADER - size)
            with self._lock:
                log = self._open.get(folder) or self._start(folder, name)
                try:
                    _write_at(log.fd, data[:frame], log.end)
                    os.fdatasync(log.fd)
                except BaseException:
                    self._close(folder)  # never append after a frame that may be cut short
                    raise
                log.end += frame
                log.frames += 1
                if log.end >= LOG_BYTES or log.frames >= LOG_FRAMES:
                    self._close(folder)
        return log.path

    def close(self) -> None:
        """Close every open log (compaction may take them); later appends start new ones."""
        with self._lock:
            for folder in list(self._open):
                self._close(folder)

    def _start(self, folder: Path, name: str) -> _Log:
        """A new, empty log in `folder`, locked before it is visible there."""
        final = folder / name
        spare = self.spares.take() if self.spares is not None else None
        fd, source = _open_locked(spare) if spare is not None else (None, temporary_for(final))
        if fd is None:
            source = temporary_for(final)
            fd, _ = _open_locked(source, create=True)
            assert fd is not None
        try:
            os.rename(source, final)
            fsync_dir(folder)
        except BaseException:
            os.close(fd)
            raise
        log = self._open[folder] = _Log(final, fd)
        return log

    def _close(self, folder: Path) -> None:
        log = self._open.pop(folder, None)
        if log is not None:
            os.close(log.fd)  # and so its lock


def _open_locked(path: Path, create: bool = False) -> tuple[int | None, Path]:
    """`path` opened for writing (direct I/O where the file system takes it) and locked;
    None for a spare that went meanwhile."""
    # A spare left by a process that died may hold what it had begun to write there.
    flags = os.O_WRONLY | (os.O_CREAT | os.O_EXCL if create else os.O_TRUNC)
    try:
        fd = _open_direct(path, flags)
    except FileNotFoundError:
        if create:
            raise
        return None, path
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, path


def _open_direct(path: Path, flags: int) -> int:
    if not hot_segments.direct_refused():
        try:
            return os.open(path, flags | hot_segments.O_DIRECT, 0o644)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            hot_segments.refuse_direct()
            flags &= ~os.O_EXCL  # created before the refusal
    return os.open(path, flags, 0o644)


def _write_at(fd: int, data: memoryview, offset: int) -> None:
    """All of `data` at `offset`; a direct write refused or cut short goes on buffered."""
    written = 0
    while written < len(data):
        try:
            done = os.pwrite(fd, data[written:], offset + written)
        except OSError as exc:
            if exc.errno != errno.EINVAL or not _buffered(fd):
                raise
            continue
        if done == 0:
            if not _buffered(fd):
                raise OSError(errno.EIO, "a write wrote nothing")
            continue
        written += done


def _buffered(fd: int) -> bool:
    """Turns direct I/O off for `fd`; False when it was off already."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    if not flags & hot_segments.O_DIRECT:
        return False
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~hot_segments.O_DIRECT)
    return True
