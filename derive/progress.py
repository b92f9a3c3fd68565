"""Where a build of the derived tables from nothing stands, for the CLI, the dashboard and
`/metrics`.

A build reads every event and writes every derived table: minutes on a store of tens of
millions of events (on ClickHouse, the wait between a first read of the Collector's tables
and the first answer; on the embedded store at 100M events, twenty). A deriver tells each
step of a build as it begins, and the build's end (store/followed.py); an absorbed batch
takes seconds and tells nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from store.followed import Followed


@dataclass
class BuildProgress:
    """One build of the derived tables from nothing, step by step (a step is one table
    written; some take far longer than others)."""

    steps_total: int
    steps_done: int = 0
    #: The table the step under way writes.
    step: str = ""
    started: float = field(default_factory=time.monotonic)
    finished: bool = False

    def seconds(self) -> float:
        """Seconds since the build began."""
        return time.monotonic() - self.started

    def describe(self) -> str:
        if self.finished:
            return (f"built the derived tables from nothing: {self.steps_total} steps in "
                    f"{self.seconds():.0f} s")
        return (f"building the derived tables from nothing: step {self.steps_done + 1} of "
                f"{self.steps_total} ({self.step}), {self.seconds():.0f} s so far")


class Builds(Followed[BuildProgress]):
    """The listeners of a deriver's builds, and the last state they were told."""


class BuildSteps:
    """A build's steps, told to `builds` as each begins. Where the steps depend on what a
    build finds (the parts of an embedded build), each stage `expect`s its own before the
    first begins."""

    def __init__(self, builds: Builds | None, total: int = 0) -> None:
        self.builds = builds
        self.state = BuildProgress(steps_total=total)

    def expect(self, steps: int) -> None:
        """`steps` more steps to come."""
        self.state.steps_total += steps

    def begin(self, step: str) -> None:
        """Step `step` begins (the steps before it are done)."""
        if self.state.step:
            self.state.steps_done += 1
        self.state.step = step
        self._tell()

    def finish(self) -> None:
        self.state.steps_done = self.state.steps_total
        self.state.finished = True
        self._tell()

    def _tell(self) -> None:
        if self.builds is not None:
            self.builds.tell(BuildProgress(**vars(self.state)))
