"""`--tail FILE...`: follow growing log files, across rotation and collector restarts.

A path with `*`, `?` or `[` in it is a pattern (quote it from the shell), unless a file
of that very name exists: it is expanded again at each poll, so files that appear later
(a new service's log) are followed from their start. A pattern that also matches the
name a file is rotated to (`app.log*`) reads the rotated file again from its start: its
lines are repeats, dropped as such (see below). Taking up its old position by inode
instead would lose lines: an inode number freed by a deleted file is soon given to a new
one, which would then be read from the old file's offset.

Each file's position is kept as (inode, offset) in a JSON state file and advanced only
after the rows read up to that offset are durable, so a restart resumes exactly where
the acknowledged data ends: nothing is lost, and nothing is read twice (and a line read
twice would collapse anyway, its event_uid being a hash of its content). A rotated file
(same path, new inode) is read to its end first, found by inode in its folder, then the
new file is read from its start. A file that shrank was truncated: read from the start.

An inode number alone does not tell a file from the next one given that number: a log
deleted and made anew (or emptied by `copytruncate` and written again) while the
collector was down can have the same inode and have grown past the old offset. So a
position also keeps a fingerprint of the file's first bytes read (up to HEAD_BYTES); a
file whose first bytes no longer match is a new file, read from its start.

A file's format is told from its first lines read (`text_logs.tell`), or given: JSON lines
and OTLP JSON Lines go to the collector's decoder; a Celery, Sidekiq, Dramatiq, RQ or arq
worker's log goes to a reader of its own per path (across rotations), which keeps what
later lines need (which run a line ends) and is rolled back with the offset when a chunk's
rows were not stored. RQ's and arq's lines carry only a time of day: they are dated by
`--date`, else by the time they are read (collectors/time_of_day.py). Resumed after a
restart, that reader first reads again (storing nothing) up to PRIME_BYTES of the file
before the saved offset, to learn what those lines said.

A line longer than a read chunk is skipped (and counted as rejected) once its end is
found, looking for it a chunk at a time: memory stays bounded by the chunk however long
the line, and a line still being written is looked at again only from where the last
look stopped.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from collectors.celery_log import CeleryLogOptions
from collectors.service.bodies import DecodeResult, from_decoded
from collectors.service.collector import Collector
from collectors.service.log_limit import SummarisedLog
from collectors.service.pipeline import QueueFull, WriteFailed
from collectors.text_logs import TEXT_LOGS, TextLogReader, tell
from collectors.text_logs import reader as text_log_reader
from collectors.time_of_day import DayBasis

log = logging.getLogger("dupescope.collect")

READ_CHUNK = 4 * 1024 * 1024
#: How many of a file's first bytes its fingerprint covers.
HEAD_BYTES = 1024
#: How much of a Celery log before the saved offset a resumed tail reads again (storing
#: nothing) to learn what those lines said: the worker's name, the runs still open.
PRIME_BYTES = 16 * 1024 * 1024
#: Seconds between looks for positions of files gone for good, which are then dropped.
PRUNE_EVERY = 60.0


@dataclass
class Position:
    inode: int
    offset: int
    #: The fingerprint of the file's first `head_len` bytes (`fingerprint`), once read.
    head: str = ""
    head_len: int = 0
    #: Not saved: how far an over-long line starting at `offset` is known to go on.
    scanned: int = 0

    def restart(self) -> None:
        """From the file's start, fingerprint and all."""
        self.offset, self.head, self.head_len, self.scanned = 0, "", 0, 0


def fingerprint(data: bytes) -> str:
    """A file's first bytes as a short digest: the state file keeps that, not the bytes."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _head_matches(handle: BinaryIO, position: Position) -> bool:
    """Whether the open file still starts with the bytes `position` was fingerprinted on
    (True while it has none yet)."""
    if position.head_len == 0:
        return True
    handle.seek(0)
    return fingerprint(handle.read(position.head_len)) == position.head


class TailState:
    """Offsets per path, saved atomically (write, fsync, rename) after each durable batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.positions: dict[str, Position] = {}
        if path.exists():
            try:
                data = orjson.loads(path.read_bytes())
                self.positions = {k: Position(**v) for k, v in data.items()}
            except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
                log.warning("tail state %s unreadable (%s); starting from the files' start",
                            path, exc)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        data = {
            k: {"inode": v.inode, "offset": v.offset, "head": v.head, "head_len": v.head_len}
            for k, v in self.positions.items()
        }
        with open(temporary, "wb") as handle:
            handle.write(orjson.dumps(data))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def _is_pattern(path: str) -> bool:
    return any(c in path for c in "*?[")


def _find_by_inode(folder: Path, inode: int) -> Path | None:
    """Where a rotated file went (app.log -> app.log.1): same folder, same inode."""
    try:
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False) and entry.inode() == inode:
                return Path(entry.path)
    except OSError:
        return None
    return None


class Tailer:
    """Polls its files; each complete line goes through the JSON-lines/OTLP decoder, or a
    Celery log's reader."""

    def __init__(
        self,
        collector: Collector,
        paths: list[str],
        state_path: Path,
        interval: float = 0.25,
        read_chunk: int = READ_CHUNK,
        fmt: str = "auto",
        celery: CeleryLogOptions | None = None,
        day: DayBasis | None = None,
    ) -> None:
        """`fmt`: auto, json-lines, celery-log, rq-log or arq-log (see the module's
        docstring); `day`: the date of RQ's and arq's time-only lines (`--date`; else the
        time they are read)."""
        self.collector = collector
        self.fmt = fmt
        self.celery = celery
        self.day = day or DayBasis()
        self.formats: dict[str, str] = {}  # path -> format, once told
        self.celery_readers: dict[str, TextLogReader] = {}
        self.read_chunk = read_chunk
        self.paths: list[str] = []
        # (pattern, the file it would name taken literally): a pattern is one as given, its
        # folder escaped when relative, so the folder's own brackets match themselves.
        self.patterns: list[tuple[str, str]] = []
        for given in paths:
            absolute = str(Path(given).absolute())
            if _is_pattern(given) and not os.path.isfile(given):
                folder = "" if os.path.isabs(given) else glob.escape(os.getcwd())
                self.patterns.append((os.path.join(folder, given), absolute))
            else:
                self.paths.append(absolute)
        for pattern, _ in self.patterns:
            if not glob.glob(pattern):
                log.info("tail pattern %s matches no file yet", pattern)
        self.state = TailState(state_path)
        self._problems = SummarisedLog(log, every=60.0)  # an unreadable file, every poll
        self.interval = interval
        self._pruned_at = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dupescope-tail", daemon=True)

    def start(self) -> Tailer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def current_paths(self) -> list[str]:
        """The files given by name, then the regular files the patterns match now (and a
        file named like a pattern, where one has appeared since the start)."""
        matched = set()
        for pattern, literal in self.patterns:
            matched.update(path for path in glob.glob(pattern) if os.path.isfile(path))
            if os.path.isfile(literal):
                matched.add(literal)
        return self.paths + sorted(matched - set(self.paths))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.cycle()
            self._stop.wait(self.interval)

    def cycle(self) -> None:
        """One poll of every file."""
        try:
            paths = self.current_paths()
        except OSError as exc:
            self._problems.warn("patterns", "tail patterns unreadable: %s", exc)
            return
        for path in paths:
            try:
                self.poll(path)
            except (QueueFull, WriteFailed) as exc:
                log.info("tail %s: will retry (%s)", path, exc)
            except Exception:  # a tail's error is logged, never raised into the loop
                self._problems.warn(path, "tail %s failed", path, exc_info=True)
        if time.monotonic() - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = time.monotonic()
            self.prune(paths)

    def prune(self, followed: list[str]) -> list[str]:
        """Drop the positions of files gone for good, so that the state (saved after every
        batch) does not grow with every file a pattern ever matched: a path not followed
        now, absent, whose inode is in its folder no longer (the file was deleted, not
        rotated: a rotated one is still to be read to its end). Returns the paths dropped."""
        following = set(followed)
        gone = [
            path for path, position in self.state.positions.items()
            if path not in following and not os.path.lexists(path)
            and _find_by_inode(Path(path).parent, position.inode) is None
        ]
        for path in gone:
            del self.state.positions[path]
        if gone:
            self.state.save()
            log.info("tail: dropped the positions of %d file(s) gone", len(gone))
        return gone

    def poll(self, path: str) -> int:
        """Read what is new in `path` (and in its rotated predecessor); returns rows stored."""
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return 0
        known = self.state.positions.get(path)
        stored = 0
        if known is not None and known.inode != status.st_ino:
            rotated = _find_by_inode(Path(path).parent, known.inode)
            if rotated is not None:
                stored += self._read(path, rotated, known, rotated=True)
            known = None
        if known is None:
            known = Position(status.st_ino, 0)
            self.state.positions[path] = known
        elif status.st_size < known.offset:
            log.warning("tail %s: file shrank, reading it from the start", path)
            known.restart()
        stored += self._read(path, Path(path), known)
        return stored

    def _read(self, name: str, file: Path, position: Position, rotated: bool = False) -> int:
        """Complete lines from `position.offset` on; the offset moves once they are durable.
        A file that no longer starts as it did is read from its start, or, found by the
        inode its predecessor had (`rotated`), not at all: it is some other file."""
        stored = 0
        with open(file, "rb") as handle:
            if not _head_matches(handle, position):
                if rotated:
                    return 0
                log.warning("tail %s: a new file with the same inode, reading it from the "
                            "start", name)
                position.restart()
            while True:
                handle.seek(position.offset)
                chunk = handle.read(self.read_chunk)
                end = chunk.rfind(b"\n") + 1
                if end == 0:
                    if len(chunk) < self.read_chunk:
                        return stored  # an unfinished line: read once it ends
                    after = self._end_of_line(handle, position)
                    if after is None:
                        return stored
                    self._problems.warn(name, "tail %s: line of %d bytes skipped (over %d)",
                                        name, after - position.offset, self.read_chunk)
                    self.collector.reject(1)
                    self._advance(handle, position, after)
                    continue
                rows, read = self._decode(
                    name, chunk[:end], handle, position.offset, growing=not rotated
                )
                stored += rows
                if read < end:  # a Celery log's reader waits for the lines to come
                    if read:
                        self._advance(handle, position, position.offset + read)
                    return stored
                self._advance(handle, position, position.offset + end)
                if len(chunk) < self.read_chunk:
                    return stored

    def _format(self, name: str, chunk: bytes) -> str:
        if self.fmt != "auto":
            return self.fmt
        if name not in self.formats:
            told = tell(chunk[: 64 << 10], self.celery)
            if told is None:
                return "json-lines"  # not yet told: as before, each line on its own
            self.formats[name] = told
        return self.formats[name]

    def _decode(
        self, name: str, lines: bytes, handle: BinaryIO, offset: int, growing: bool = True
    ) -> tuple[int, int]:
        """Complete lines of `name` (read from `handle` at `offset`) -> durable rows;
        returns how many were stored, and how many bytes of `lines` were read (all but
        those a Celery log's reader waits to read with the lines that follow them, in a
        file still `growing`)."""
        source = f"tail:{name}"
        fmt = self._format(name, lines)
        if fmt not in TEXT_LOGS:
            return self.collector.jsonlines(lines, source).accepted, len(lines)
        reader = self.celery_readers.get(name)
        if reader is None:
            normaliser = self.collector.decoder.normaliser
            reader = text_log_reader(fmt, normaliser, name, celery=self.celery, day=self.day)
            if offset > 0:  # resumed: what the lines before the offset said, read again
                handle.seek(max(0, offset - PRIME_BYTES))
                before = handle.read(offset - handle.tell())
                if offset > PRIME_BYTES:
                    before = before[before.find(b"\n") + 1 :]
                reader.prime(before)
            self.celery_readers[name] = reader
        before = reader.checkpoint()
        read = len(lines)

        def decode() -> DecodeResult:
            nonlocal read
            if growing:
                decoded, read = reader.decode_growing(lines, 1, source)
            else:
                decoded = reader.decode(lines, 1, source)
            return from_decoded(decoded)

        try:
            result = self.collector.decoded_lines(decode)
        except BaseException:
            reader.restore(before)  # the chunk is read again, from the same state
            raise
        return result.accepted, read

    def _end_of_line(self, handle: BinaryIO, position: Position) -> int | None:
        """The offset after the newline that ends the line at `position.offset`, looked for
        a chunk at a time from where an earlier look stopped; None while it has none."""
        start = max(position.offset + self.read_chunk, position.scanned)
        handle.seek(start)
        while piece := handle.read(self.read_chunk):
            newline = piece.find(b"\n")
            if newline >= 0:
                return start + newline + 1
            start += len(piece)
        position.scanned = start
        return None

    def _advance(self, handle: BinaryIO, position: Position, offset: int) -> None:
        """Move to `offset`, durably: the fingerprint grows with the bytes read, up to
        HEAD_BYTES, and is saved with the offset."""
        position.offset, position.scanned = offset, 0
        if position.head_len < HEAD_BYTES:
            handle.seek(0)
            head = handle.read(min(HEAD_BYTES, offset))
            position.head, position.head_len = fingerprint(head), len(head)
        self.state.save()
