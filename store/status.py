"""What an embedded store holds and what needs attention: `dupescope status`, `/metrics`.

Read from the folder alone (file listings, Parquet footers, modification times), never by
querying the events, so a status costs milliseconds at any size and works while a build
or a compaction runs.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from store import memory
from store.embedded import EmbeddedStore
from store.hot_log import is_hot, read_hot

#: A day with more segments than this awaiting compaction is fragmented: readers open
#: them all (the collector compacts at 16).
FRAGMENTED_AWAITING = 32
#: Derived state this many seconds older than the newest segment is behind.
DERIVED_BEHIND_S = 600.0
#: Less free disk than this share of the file system is nearly full.
DISK_FREE_SHARE = 0.10
PARTS = {"events": "events", "index": "index", "derived": "derived", "trash": ".trash",
         "spill": ".compaction-spill"}


@dataclass
class Day:
    day: str
    events: int
    segments: int
    awaiting_compaction: int


@dataclass
class Status:
    events: int
    days: list[Day]
    disk_bytes: dict[str, int]
    derived_lag_s: float | None
    memory_budget_bytes: int
    memory_budget_from: str
    disk_free_bytes: int
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(path: Path) -> int:
    try:
        return int(read_hot(path).num_rows if is_hot(path) else pq.read_metadata(path).num_rows)
    except (OSError, ValueError):  # compacted away as it was read
        return 0


def _size(folder: Path) -> int:
    if not folder.exists():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _newest(paths: list[Path]) -> float | None:
    times = [p.stat().st_mtime for p in paths if p.exists()]
    return max(times) if times else None


def status(store: EmbeddedStore) -> Status:
    """The store's figures and warnings."""
    days = []
    segments = store.segments()
    by_day: dict[str, list[Path]] = {}
    for path in segments:
        by_day.setdefault(path.parent.name.removeprefix("day="), []).append(path)
    for day, paths in sorted(by_day.items()):
        covered = store._day_covers(day)
        awaiting = sum(1 for p in paths if p.name not in covered)
        days.append(Day(day, sum(_rows(p) for p in paths), len(paths), awaiting))
    derived = store.root / "derived"
    built = _newest([p for p in derived.rglob("*") if p.is_file()]) if derived.exists() else None
    written = _newest(segments)
    lag = None if built is None or written is None else max(written - built, 0.0)
    usage = shutil.disk_usage(store.root if store.root.exists() else Path("."))
    found = Status(
        events=sum(d.events for d in days),
        days=days,
        disk_bytes={name: _size(store.root / part) for name, part in PARTS.items()},
        derived_lag_s=lag,
        memory_budget_bytes=memory.budget(),
        memory_budget_from=memory.source(),
        disk_free_bytes=usage.free,
    )
    found.warnings = _warnings(found, usage.total)
    return found


def _warnings(found: Status, disk_total: int) -> list[str]:
    warnings = [
        f"day {d.day} is fragmented: {d.awaiting_compaction} segments await compaction "
        f"(run `dupescope compact`, or keep `collect` or `watch` running)"
        for d in found.days if d.awaiting_compaction > FRAGMENTED_AWAITING
    ]
    if found.derived_lag_s is not None and found.derived_lag_s > DERIVED_BEHIND_S:
        warnings.append(
            f"derived state is {found.derived_lag_s:.0f} s behind the newest segment "
            f"(the next question derives what changed; `dupescope rebuild` builds it anew)"
        )
    if found.events and found.derived_lag_s is None:
        warnings.append("no derived state yet: the first question builds it")
    if disk_total and found.disk_free_bytes < disk_total * DISK_FREE_SHARE:
        warnings.append(
            f"disk nearly full: {memory.human(found.disk_free_bytes)} free "
            f"(compaction needs room for a day's merged copy)"
        )
    return warnings
