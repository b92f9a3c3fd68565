"""What an embedded store gained and lost since a reader last derived from it.

A derived build records what it read: each segment's name (`day=YYYY-MM-DD/<id>.<ext>`)
with how many commits of it (a hot log's whole frames, 1 for any other segment). What came
since is then told from the segments alone:

- a segment not read before is new, and so are the frames a hot log gained;
- compaction writes into each segment it merges which segments, and how many frames of
  each log, it holds (`LINEAGE`, in the Parquet file's metadata); a merged segment of
  segments all read before brings nothing new, only repeats dropped, so it costs nothing;
- a segment read before that neither remains nor was merged into a present one left by
  retention: its rows are read back from `.trash/`, where retention moved them, so what
  they made can be derived again. Gone from the trash too, the caller builds from nothing.

A merged segment whose inputs were not all read brings the rows not read, taken from its
inputs in `.trash/`; with an input gone from there too, it counts as new whole. That
costs rows read again, never a row missed: deriving a key again from its full history is
the same work as deriving it once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from store.hot_log import is_hot, is_log, read_log
from store.hot_segments import read_ipc
from store.lookup_index import segment_name
from store.schema import EVENTS_SCHEMA, empty_table

#: Parquet metadata key of a merged segment: JSON {segment name: commits merged}.
LINEAGE = "dupescope.merged"


def commits(path: Path) -> int:
    """How many commits a segment holds: a hot log's whole frames, else 1."""
    if is_log(path):
        return len(read_log(path)[0])
    return 1


def inputs_of(paths: Iterable[Path]) -> dict[str, int]:
    """The lineage compaction writes into a segment it merges from `paths`."""
    return {segment_name(p): commits(p) for p in paths}


def lineage(path: Path) -> dict[str, int] | None:
    """The segments a merged segment holds, or None for one written as it arrived."""
    if is_hot(path):
        return None
    metadata = pq.read_schema(path).metadata or {}
    recorded = metadata.get(LINEAGE.encode())
    return json.loads(recorded) if recorded else None


@dataclass
class Changes:
    """What a store holds now against what was read before."""

    #: Every present segment with the commits of it now accounted for.
    read: dict[str, int]
    #: Rows not read before (whole new segments, a log's new frames).
    added: list[pa.Table] = field(default_factory=list)
    #: Rows that left the store by retention.
    removed: list[pa.Table] = field(default_factory=list)
    #: Segments present now and not before (new, or merged from old ones).
    new_segments: list[Path] = field(default_factory=list)
    #: Hot logs read before that grew: (name, the rows of their new frames).
    grown: list[tuple[str, pa.Table]] = field(default_factory=list)
    #: Segments read before and no longer present (merged away or dropped).
    gone: list[str] = field(default_factory=list)

    def rows(self) -> pa.Table:
        """Added and removed rows together: whatever they touch is derived again."""
        return _concat(self.added + self.removed)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.new_segments or self.grown
                    or self.gone)


def _concat(tables: list[pa.Table]) -> pa.Table:
    tables = [t.select(EVENTS_SCHEMA.names).cast(EVENTS_SCHEMA) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else empty_table()


def _rows(path: Path, name: str | None = None) -> pa.Table:
    """A segment's rows; `name`, its name in the store, says its kind where `path` (in
    the trash, with a suffix of its own) no longer does."""
    kind = name or path.name
    if is_log(kind):
        frames = read_log(path)[0]
        return _concat(frames)
    if is_hot(kind):
        return read_ipc(path)  # a hot segment (not a log), wherever it is
    # One file: read as itself (`pq.read_table` goes through pyarrow.dataset, whose import
    # loads pandas into a reader that would otherwise never need it).
    return pq.ParquetFile(path).read(columns=EVENTS_SCHEMA.names)


def since(trash_dir: Path, segments: list[Path], before: dict[str, int]) -> Changes | None:
    """What `segments` (a store's listing now) gained and lost against `before`; None if
    a segment that left by retention can no longer be read."""
    changes = Changes(read={})
    merged_from: set[str] = set()
    for path in segments:
        name = segment_name(path)
        if is_log(path):
            frames, _ = read_log(path)
            changes.read[name] = len(frames)
            known = before.get(name)
            if known is None:
                changes.new_segments.append(path)
                changes.added.extend(frames)
            elif len(frames) > known:
                new = _concat(frames[known:])
                changes.grown.append((name, new))
                changes.added.append(new)
            continue
        changes.read[name] = 1
        if name in before:
            continue
        changes.new_segments.append(path)
        inputs = lineage(path)
        if inputs is not None:
            merged_from.update(inputs)
            unread = _unread_inputs(trash_dir, inputs, before)
            if unread is not None:  # merged from what was read, and what the trash holds
                changes.added.extend(unread)
                continue
        changes.added.append(_rows(path))
    for name in sorted(set(before) - set(changes.read)):
        changes.gone.append(name)
        if name in merged_from:
            continue
        dropped = _in_trash(trash_dir, name)
        if dropped is None:
            return None
        changes.removed.append(_rows(dropped, name))
    return changes


def _unread_inputs(
    trash_dir: Path, inputs: dict[str, int], before: dict[str, int]
) -> list[pa.Table] | None:
    """The rows a merged segment holds that were not read before, taken from its inputs
    in `.trash/` (compaction moves them there for five minutes): a log's frames past
    those read, a segment never read whole. None if an input needed is gone."""
    unread = []
    for name, frames in inputs.items():
        known = before.get(name, 0)
        if known >= frames:
            continue
        moved = _in_trash(trash_dir, name)
        if moved is None:
            return None
        if is_log(name):
            unread.extend(read_log(moved)[0][known:frames])
        else:
            unread.append(_rows(moved, name))
    return unread


def _in_trash(trash_dir: Path, name: str) -> Path | None:
    """Where retention or compaction moved segment `name`, if it is still there."""
    day, _, file = name.partition("/")
    for candidate in [*trash_dir.glob(f"{day}-*/{file}"), *trash_dir.glob(f"{day}-{file}-*")]:
        if candidate.is_file():
            return candidate
    return None
