"""Shared by the harnesses: arguments, timing, the workload file."""

from __future__ import annotations

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
