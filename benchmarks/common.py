"""Shared by the harnesses: arguments, timing, the workload file."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.workload import write_jsonl

DEFAULT_DIR = Path("/tmp/bench-dupescope")


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def jsonl_file(folder: Path, events: int) -> Path:
    """The workload as JSON lines, written once per size and reused across runs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"events-{events}.jsonl"
    if not path.exists():
        partial = path.with_suffix(".partial")
        seconds = timed(lambda: write_jsonl(partial, events))
        partial.rename(path)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in {seconds:.0f} s")
    return path


def rate(events: int, seconds: float) -> str:
    return f"{events / seconds:>12,.0f} events/s  ({seconds:7.2f} s)"


class CpuSpent:
    """The process's CPU seconds (user, system) over a `with` block.

    chDB runs its queries on threads of this process, so these count the store's work.
    Wall time on a shared virtual machine varies by a fifth between identical runs, most
    of it in system time; the CPU seconds say whether a change or the machine moved."""

    def __enter__(self) -> CpuSpent:
        self._start = resource.getrusage(resource.RUSAGE_SELF)
        self.user = self.system = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        end = resource.getrusage(resource.RUSAGE_SELF)
        self.user = end.ru_utime - self._start.ru_utime
        self.system = end.ru_stime - self._start.ru_stime

    def describe(self, items: int, unit: str) -> str:
        total = self.user + self.system
        per = f", {items / total:,.0f} {unit} a CPU-second" if total > 0 else ""
        return f"CPU {self.user:.1f} s user + {self.system:.1f} s system{per}"
