"""The worker processes of a large ingest, forked from a server that imported their modules.

A spawned worker imports polars, pyarrow, NumPy and the decoders on its own (0.5-1 s of
CPU each, and the command's own modules again, which multiprocessing runs as its
`__main__`). Forking the command itself would spare that, but a process that has opened a
store may run threads that hold locks at the fork. A fork server is a fresh process that
only imports: each worker forked from it starts with every module loaded, at no cost.

`start_early` starts that server before the command imports its own modules, so the two
import at once on two cores. This module imports nothing heavy, for that reason.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import os
from collections.abc import Iterable

BLOCK_BYTES = 64 << 20  # one polars read; about 150k lines of 400 bytes
#: What a worker runs: `collectors.files` imports the decoders and the segment writer;
#: pyarrow imports pandas on the first call of many of its functions (`pa.array` of Python
#: values, `Schema.empty_table`), which would cost each worker half a second in its first
#: block.
WORKER_MODULES = ("collectors.files", "pandas")


def cores() -> int:
    """The cores this process may run on: one worker each."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def large(size: int, *, compressed: bool, block_bytes: int = BLOCK_BYTES) -> bool:
    """Whether a file of `size` bytes is worth decoding in worker processes: a few blocks.

    A gzip file inflates to about five times its size.
    """
    return size > 2 * block_bytes // (5 if compressed else 1)


def wanted(paths: Iterable[str]) -> bool:
    """Whether an ingest of these files will start worker processes (see `ingest_files`):
    a large file, not stdin, and more than one core."""
    if cores() < 2:
        return False
    for path in paths:
        if path == "-" or not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            compressed = handle.read(2) == b"\x1f\x8b"
        if large(os.path.getsize(path), compressed=compressed):
            return True
    return False


def _settings() -> None:
    """Environment the workers need from their first import on (a forked worker inherits
    the fork server's environment, fixed when the server starts)."""
    # One polars thread per worker: the workers already fill the cores.
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    # polars' allocator keeps the pages it freed for the next block instead of returning
    # them and faulting them in again: a quarter of the workers' system time (the peak
    # stays one block's).
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1")


def context(preload: Iterable[str] = ()) -> multiprocessing.context.BaseContext:
    """The start method the ingest pool uses; `preload` adds modules the server imports
    (the command's `__main__` module's own imports, which each worker runs again)."""
    _settings()
    modules = list(dict.fromkeys([*WORKER_MODULES, *preload]))
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    chosen = multiprocessing.get_context(method)
    if method == "forkserver":
        chosen.set_forkserver_preload(modules)
    return chosen


def start_early(preload: Iterable[str] = ()) -> None:
    """Start the fork server now, so it imports while the caller does other work; the
    pool built later with `context()` forks its workers from it."""
    if context(preload).get_start_method() == "forkserver":
        multiprocessing.forkserver.ensure_running()
