"""One memory budget for every heavy step: the full build, compaction, ingest, the collector.

The budget comes from `--memory` (which sets DUPESCOPE_MEMORY, so worker processes see it
too), else DUPESCOPE_MEMORY, else a quarter of the machine's RAM; a default never exceeds
the cgroup's limit where there is one (a container killed for RSS it was never told
about is worse than a build that spills). Each step hands DuckDB its share as
`memory_limit`, with a folder to spill to; DuckDB left to itself takes 80% of the
machine's RAM, which is how a build over 100M events reached 21 GB resident.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV = "DUPESCOPE_MEMORY"
#: The machine's RAM that a budget takes when none is given.
DEFAULT_FRACTION = 0.25
#: No budget below this: DuckDB needs room for its buffers, Python for its imports.
FLOOR = 128 * 1024**2
#: The share of the budget a reader's DuckDB (queries, the full build) may hold; the rest
#: is the process itself: Arrow tables handed to Python, frames, imports.
READER_SHARE = 0.5
#: The share a compaction's DuckDB may hold: a collector compacts while it receives.
COMPACTION_SHARE = 0.25
#: The share of a full build's DuckDB given to each of its threads: each thread of an
#: aggregate or a join holds buffers of its own, whatever it spills, so a small share
#: runs one thread (docs/sizing.md has the measured figures).
BUILD_BYTES_PER_THREAD = 384 * 1024**2
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_CGROUP_FILES = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


class BudgetError(ValueError):
    """A memory budget that cannot be read."""


def size(text: str) -> int:
    """Bytes of a size written `4GB`, `512M`, `1.5 GiB` or plain bytes (a budget or one
    of its DuckDB shares)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if match is None:
        raise BudgetError(f"not a memory size: {text!r} (write it like 4GB, 512MB or 1.5GiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def parse(text: str) -> int:
    """Bytes of a memory budget written `4GB`, `512M`, `1.5 GiB` or plain bytes."""
    value = size(text)
    if value < FLOOR:
        raise BudgetError(f"memory budget {text!r} is below the least that works, 128MB")
    return value


def machine_ram() -> int:
    """Bytes of physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cgroup_limit() -> int | None:
    """The cgroup's memory limit in bytes, or None where there is none."""
    for path in _CGROUP_FILES:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < machine_ram():  # v1 writes a huge number for none
            return int(text)
    return None


def default_budget() -> int:
    """A quarter of the machine's RAM, never above the cgroup's limit."""
    budget = int(machine_ram() * DEFAULT_FRACTION)
    limit = cgroup_limit()
    if limit is not None:
        budget = min(budget, int(limit * 0.75))
    return max(budget, FLOOR)


def configure(text: str | None) -> None:
    """Make `text` (from --memory) the budget of this process and of those it starts."""
    if text is not None:
        parse(text)  # a bad value fails here, where the option was given
        os.environ[ENV] = text


def budget() -> int:
    """The budget in bytes: DUPESCOPE_MEMORY if set, else the default."""
    text = os.environ.get(ENV)
    return parse(text) if text else default_budget()


def source() -> str:
    """Where the budget came from, for `dupescope status`."""
    return ENV if os.environ.get(ENV) else "default"


def duckdb_limit(share: float) -> str:
    """A DuckDB `memory_limit` for `share` of the budget."""
    return f"{max(int(budget() * share), FLOOR // 2) // 1024**2}MB"


def reader_limit() -> str:
    """What a reader's DuckDB may hold (queries and the full build)."""
    return duckdb_limit(READER_SHARE)


def build_threads() -> int:
    """DuckDB threads for a full build: as many as the reader's share holds, at least one
    (more threads than fit ran it out of memory instead of spilling)."""
    share = int(budget() * READER_SHARE)
    return max(1, min(os.cpu_count() or 1, share // BUILD_BYTES_PER_THREAD))


def compaction_limit() -> str:
    """What a merge's DuckDB may hold."""
    return duckdb_limit(COMPACTION_SHARE)


def human(size: int) -> str:
    """Bytes as people read them."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
