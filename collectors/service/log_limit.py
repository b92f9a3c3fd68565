"""Warnings that come in floods, logged at most once per interval each, with a count.

Under overload every request is answered 429, and while the store cannot be written
every group commit fails: one log line each would bury the log at hundreds a second.
The first of a kind is logged at once; the rest within the interval are counted and
reported, with the time of the first of them, in the next line logged of that kind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class SummarisedLog:
    """`warn(kind, ...)` logs at most once per `every` seconds for each `kind`."""

    def __init__(
        self,
        log: logging.Logger,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.log, self.every, self.clock, self.wall = log, every, clock, wall
        self._lock = threading.Lock()
        # kind -> (when last logged, how many held back since, when the first of them came)
        self._kinds: dict[object, tuple[float, int, float]] = {}

    def warn(self, kind: object, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log `message % args` as a warning unless one of `kind` was logged less than
        `every` seconds ago (then at DEBUG only); returns whether it was a warning."""
        now = self.clock()
        with self._lock:
            last, held, first_held = self._kinds.get(kind, (None, 0, 0.0))
            if last is not None and now - last < self.every:
                self._kinds[kind] = (last, held + 1, first_held if held else self.wall())
                self.log.debug(message, *args, exc_info=exc_info)
                return False
            self._kinds[kind] = (now, 0, 0.0)
        if held:
            message += f" (and {held} more like it since {clock_time(first_held)})"
        self.log.warning(message, *args, exc_info=exc_info)
        return True


def clock_time(unix: float) -> str:
    """A moment as the local time of day a log line shows."""
    return time.strftime("%H:%M:%S", time.localtime(unix))
