"""Give freed memory back to the system once the process has grown past a mark.

The collector keeps freed memory for the next request (`run.keep_freed_memory`): small
requests then reuse the same pages instead of faulting new ones in. But glibc only gives
a heap's memory back from its top, past `M_TRIM_THRESHOLD`, and each of the few arenas
keeps its own: after large bodies (10 MB, decoded into columns of the same order) the
pages they used stayed with the process, held free, and RSS grew with every new size of
body from ~190 MB to 0.5-1.1 GB, never to come down. `malloc_trim` gives back every whole
free page of every arena, wherever it lies. It costs 3-100 ms and holds the allocator's
locks while it runs, so it is not called after each request (that cost 5-8% CPU a span at
the benchmark's rates), only by a thread that looks at RSS twice a second and finds the
process above the mark, which the benchmark's steady state stays under.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("dupescope.collect")

#: Above this RSS, freed memory is given back (bytes). The collector at rest holds ~190 MB,
#: under steady load from small requests ~280-330 MB.
TRIM_ABOVE = 384 << 20
#: How often RSS is looked at (seconds): one read of /proc/self/statm.
TRIM_EVERY = 0.5
#: After a trim that left RSS above the mark (live data, not free memory), the next one
#: waits until RSS grew this much more, or TRIM_AGAIN_AFTER seconds passed.
TRIM_AGAIN_GROWTH = 32 << 20
TRIM_AGAIN_AFTER = 10.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's RSS, from /proc/self/statm (0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None for another C library."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryTrimmer:
    """A daemon thread that calls malloc_trim when RSS is above `above` bytes."""

    def __init__(
        self,
        above: int = TRIM_ABOVE,
        every: float = TRIM_EVERY,
        rss: Callable[[], int] = resident_bytes,
        trim: Callable[[], object] | None = None,
    ) -> None:
        self.above = above
        self.every = every
        self.trims = 0
        self._rss = rss
        self._trim = trim or _malloc_trim()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)
        self._left = 0  # RSS after the last trim
        self._last = float("-inf")  # monotonic time of the last trim

    @property
    def available(self) -> bool:
        return self._trim is not None

    def start(self) -> MemoryTrimmer:
        if self._trim is not None:
            self._thread.start()
        return self

    def check(self) -> bool:
        """Trim now if RSS asks for it; whether it did."""
        if self._trim is None:
            return False
        rss = self._rss()
        if rss <= self.above:
            return False
        again = self._left <= self.above or rss >= self._left + TRIM_AGAIN_GROWTH
        if not again and time.monotonic() - self._last < TRIM_AGAIN_AFTER:
            return False
        self._trim()
        self.trims += 1
        self._left, self._last = self._rss(), time.monotonic()
        log.debug("malloc_trim: RSS %d -> %d MB", rss >> 20, self._left >> 20)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.check()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
