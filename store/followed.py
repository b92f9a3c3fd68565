"""Work that takes minutes tells whoever watches it how far it has come.

A first read of the Collector's tables and a build of the derived tables from nothing
each take minutes on a large store: a person wants to see where they stand (the CLI's
stderr, the dashboard's bar) and a scraper the same as numbers (`/metrics`). The work
tells its state here after each step; whoever shows it subscribes (`follow`). A
listener's error is logged, never raised into the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger("dupescope.store")

State = TypeVar("State")


class Followed(Generic[State]):
    """The listeners of one kind of long work, and the last state they were told."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[State], None]] = []
        self.last: State | None = None

    def follow(self, listener: Callable[[State], None]) -> None:
        self.listeners.append(listener)

    def unfollow(self, listener: Callable[[State], None]) -> None:
        """Stop telling `listener` (a page that showed one run of the work)."""
        if listener in self.listeners:
            self.listeners.remove(listener)

    def tell(self, state: State) -> None:
        self.last = state
        for listener in list(self.listeners):
            try:
                listener(state)
            except Exception:  # a display's failure must not stop the work
                log.exception("a progress listener failed")
