"""The worker processes of a large ingest, started with their modules already imported.

A spawned worker imports polars, pyarrow, NumPy, pandas and the decoders on its own (0.5-1 s
of CPU each, and the command's own modules again, which multiprocessing runs as its
`__main__`). A forked one starts with everything its parent imported. Forking is safe
where the parent has run no polars computation (a child would inherit polars' thread
pool without its threads) and no thread of its own that could hold a lock at the fork
(the threads the imports start, jemalloc's and polars' spill cleaner, are those a fork
server has too): `dupescope ingest` forks its workers first thing, before it decodes
anything, with tqdm's monitor thread off. Other callers (a library user, the tests) may
have used polars already: their workers are forked from a fork server, a fresh process
that only imports.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
from collections.abc import Iterable

BLOCK_BYTES = 64 << 20  # one polars read; about 150k lines of 400 bytes
#: What a worker runs: `collectors.files` imports the decoders and the segment writer. A
#: worker never loads pandas (0.2-0.3 s each): its path avoids the pyarrow calls that import
#: it on their first use (`pa.array`, `pa.scalar`, `to_numpy`, `Schema.empty_table`).
WORKER_MODULES = ("collectors.files",)


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


def wanted(paths: Iterable[str], *, block_bytes: int = BLOCK_BYTES) -> bool:
    """Whether an ingest of these files will decode one in worker processes (see
    `ingest_files`): a large file, not stdin."""
    for path in paths:
        if path == "-" or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as handle:
                compressed = handle.read(2) == b"\x1f\x8b"
        except OSError:  # unreadable: the ingest itself says so, with the file's name
            continue
        if large(os.path.getsize(path), compressed=compressed, block_bytes=block_bytes):
            return True
    return False


def settings() -> None:
    """Environment the workers need before polars loads in the process they are forked
    from (this one, or the fork server, which inherits it when it starts)."""
    # One polars thread per worker: the workers already fill the cores.
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    # polars' allocator keeps the pages it freed for the next block instead of returning
    # them and faulting them in again: a quarter of the workers' system time (the peak
    # stays one block's).
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1")


def context(*, fork: bool = False) -> multiprocessing.context.BaseContext:
    """The start method of the ingest pool: `fork` where the caller has used no polars
    yet, else a fork server that has imported what a worker runs."""
    settings()
    if fork:
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(list(WORKER_MODULES))
    return server
