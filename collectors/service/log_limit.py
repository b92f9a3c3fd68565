"""Warnings that come in floods, logged at most once per interval each, with a count.

Under overload every request is answered 429, and while the store cannot be written
every group commit fails: one log line each would bury the log at hundreds a second.
The first of a kind is logged at once; the rest within the interval are counted and
reported with the next one logged.
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
    ) -> None:
        self.log, self.every, self.clock = log, every, clock
        self._lock = threading.Lock()
        self._kinds: dict[object, tuple[float, int]] = {}  # kind -> (last logged, held back)

    def warn(self, kind: object, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log `message % args` unless one of `kind` was logged less than `every` seconds
        ago; returns whether it was logged."""
        now = self.clock()
        with self._lock:
            last, held = self._kinds.get(kind, (None, 0))
            if last is not None and now - last < self.every:
                self._kinds[kind] = (last, held + 1)
                return False
            self._kinds[kind] = (now, 0)
        if held:
            message += f" (and {held} more like it in the last {self.every:g} s)"
        self.log.warning(message, *args, exc_info=exc_info)
        return True
