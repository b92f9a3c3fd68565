"""How a read of the exporter's tables is cut into bounded chunks, newest first.

A first read of a billion spans in one insert holds the whole mapping's intermediate
stage at once, and a read killed near its end starts again from nothing. Cut by the
tables' own layout instead: day partitions, newest first, and their parts, in chunks of at
most `max_rows` rows (a part larger than that is a chunk of its own). Each chunk is mapped
and added to `events` on its own and recorded as read, so the recent days are in `events`
first, memory stays bounded, and a read killed halfway resumes at the chunk it was in.
The questions still wait for the whole read of a refresh (limit it with `since`).

`since` keeps only the days on or after a cutoff (whole days: the exporter partitions by
day, and a part's rows are never filtered by time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

#: Spans (or log records) a chunk holds at most, unless one part alone holds more. About a
#: quarter of a minute of mapping on a 2-core machine, and a few hundred MB of stage.
CHUNK_ROWS = 2_000_000

_DAY = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_SINCE = re.compile(r"^\s*(\d{1,6})\s*([hdw])\s*$")
_SINCE_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class Part:
    """An active part of one of the exporter's tables (system.parts)."""

    table: str
    partition: str
    name: str
    max_block: int
    rows: int = 0
    min_block: int = 0

    def holds(self, other: Part) -> bool:
        """Whether this part holds `other`'s rows: itself, or the part a merge made of it
        (a merge spans its inputs' blocks)."""
        return (self.table == other.table and self.partition == other.partition
                and self.min_block <= other.min_block and self.max_block >= other.max_block)


def holding(planned: list[Part], active: list[Part]) -> list[Part]:
    """The active parts that hold the rows of the `planned` ones now, once each: a part
    planned for a chunk may have been merged since, and then its rows are in the merged
    part (read whole: a row read twice replaces itself). A planned part no active part
    holds is gone (its partition dropped)."""
    by_partition: dict[tuple[str, str], list[Part]] = {}
    for part in active:
        by_partition.setdefault((part.table, part.partition), []).append(part)
    found: dict[tuple[str, str], Part] = {}
    for part in planned:
        for candidate in by_partition.get((part.table, part.partition), []):
            if candidate.holds(part):
                found[(candidate.table, candidate.name)] = candidate
                break
    return list(found.values())


def partition_day(partition: str) -> date | None:
    """The day a partition id names (`toDate(Timestamp)` gives `YYYYMMDD`), else None."""
    found = _DAY.match(partition)
    if not found:
        return None
    try:
        return date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:
        return None


def parse_since(text: str) -> timedelta:
    """`?since=` on a source URL: `36h`, `7d`, `2w`. ValueError says what is accepted."""
    found = _SINCE.match(text)
    if not found or int(found[1]) == 0:
        raise ValueError(
            f"since={text!r} is not a span of history: use a number of hours, days or "
            "weeks such as 36h, 7d, 2w"
        )
    return timedelta(**{_SINCE_UNITS[found[2]]: int(found[1])})


def cutoff_day(since: timedelta | None, now: datetime) -> date | None:
    """The first day read under `since` (the day `now - since` falls in), or None."""
    return None if since is None else (now - since).date()


def within(parts: list[Part], first_day: date | None) -> list[Part]:
    """The parts of days on or after `first_day` (a partition that names no day is kept)."""
    if first_day is None:
        return parts
    kept = []
    for part in parts:
        day = partition_day(part.partition)
        if day is None or day >= first_day:
            kept.append(part)
    return kept


def plan(parts: list[Part], max_rows: int = CHUNK_ROWS) -> list[list[Part]]:
    """The parts to read in chunks: newest partition first, each partition's parts
    newest block first, a chunk holding at most `max_rows` rows (a part larger than that
    alone). Small days share a chunk: each chunk pays some statements of its own."""
    ordered = sorted(parts, key=lambda p: (p.partition, p.max_block, p.name), reverse=True)
    chunks: list[list[Part]] = []
    chunk: list[Part] = []
    held = 0
    for part in ordered:
        if chunk and held + part.rows > max_rows:
            chunks.append(chunk)
            chunk, held = [], 0
        chunk.append(part)
        held += part.rows
    if chunk:
        chunks.append(chunk)
    return chunks
