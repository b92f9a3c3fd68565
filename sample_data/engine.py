"""A minimal discrete-event scheduler: callbacks and generator processes on one heap."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from typing import Any

Proc = Generator[int, None, None]


class Process:
    """A running generator; it yields the delay (µs) until it wants to resume."""

    __slots__ = ("gen", "killed")

    def __init__(self, gen: Proc) -> None:
        self.gen = gen
        self.killed = False


class Sim:
    """Runs callbacks in time order; ties break by scheduling order, so runs repeat exactly."""

    def __init__(self) -> None:
        self.now = 0
        self._queue: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, t: int, fn: Callable[..., Any], *args: Any) -> None:
        heapq.heappush(self._queue, (max(t, self.now), self._seq, fn, args))
        self._seq += 1

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def spawn(self, gen: Proc, delay: int = 0) -> Process:
        proc = Process(gen)
        self.after(delay, self._step, proc)
        return proc

    def _step(self, proc: Process) -> None:
        if proc.killed:
            return
        try:
            delay = next(proc.gen)
        except StopIteration:
            return
        self.after(delay, self._step, proc)

    def run(self) -> None:
        while self._queue:
            t, _, fn, args = heapq.heappop(self._queue)
            self.now = t
            fn(*args)
