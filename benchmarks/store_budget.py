"""The heavy steps of an embedded store under one memory budget: load, full build, compaction.

Fills a store with N events of the benchmarks' own generator (benchmarks/workload.py, not
the sample model), then runs `dupescope rebuild` (the full build) and `dupescope compact`
each as a process of its own under `--memory`, and prints each step's wall time and peak
resident memory (the child's own, from wait4), with the disk the store takes.

    python -m benchmarks store_budget --events 10000000 --memory 4GB --dir DIR

Steps run in the order given by --steps (load, rebuild, compact); a store kept in --dir
is reused by a later run that leaves out `load`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_RSS = 4 * 1024**3


def _load(events: int, folder: str) -> None:
    """Write the workload's events into the store as Arrow batches (what ingest writes)."""
    from benchmarks import workload
    from store.embedded import EmbeddedStore

    store = EmbeddedStore(folder)
    for part in workload.arrow_batches(events):
        store.write(part)
    store.close()


def _run(argv: list[str], memory: str) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, exit status) of a child process."""
    env = {**os.environ, "DUPESCOPE_MEMORY": memory}
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss * 1024, child.returncode


def _disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks store_budget", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--memory", default="4GB", help="the budget every step runs under")
    parser.add_argument("--dir", type=Path, required=True, help="the store (kept)")
    parser.add_argument("--steps", default="load,rebuild,compact")
    parser.add_argument("--child-load", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_load:
        _load(args.events, str(args.dir))
        return 0
    dupescope = [sys.executable, "-m", "dupescope.cli", "--store", str(args.dir)]
    commands = {
        "load": [sys.executable, "-m", "benchmarks.store_budget", "--child-load",
                 "--events", str(args.events), "--dir", str(args.dir)],
        "rebuild": [*dupescope, "rebuild"],
        "compact": [*dupescope, "compact"],
    }
    print(f"dupescope store_budget: {args.events:,} events (workload generator), "
          f"budget {args.memory}, store {args.dir}", flush=True)
    failed = 0
    for step in args.steps.split(","):
        seconds, rss, status = _run(commands[step], args.memory)
        segments = len(list((args.dir / "events").glob("day=*/*.parquet")))
        verdict = "ok" if rss <= TARGET_RSS else "above 4 GB"
        print(f"{step}: {seconds:.1f} s, peak RSS {rss / 1024**3:.2f} GB ({verdict}), "
              f"exit {status}, {segments} segments, store {_disk(args.dir) / 1024**3:.2f} GB",
              flush=True)
        failed |= status
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
