"""A bulk `dupescope ingest`, then new batches through the collector, with no manual
compaction: what a user who loads a history and then goes live meets.

For each size N, on the benchmarks' own generator (benchmarks/workload.py, not the
sample model), in one run:

- **ingest**: the workload written as a JSON-lines file, then `dupescope ingest` in its
  own process (which compacts what it loaded): time and peak RSS, and the segments left;
- **first answer**: `dupescope duplicates` once, as a new process (the derived state
  built from nothing);
- **freshness**: a batch posted to a running `dupescope collect`; from its 200 until a new
  process of `dupescope duplicates --format json` (and `--since 1h`) lists the batch's
  duplicated key (target under 2 s);
- **timeline**: `dupescope timeline KEY --format json` as a new process, for the batch's
  key (the whole command, interpreter start included), and `queries.timeline` in a warm
  process (target under 0.5 s).

    python -m benchmarks ingest_fresh [--sizes 10000000] [--batch 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import workload
from benchmarks.alert_latency import CollectorProcess
from benchmarks.freshness import (
    ROOT,
    Workload,
    as_json_lines,
    dup_key,
    duplicated_key,
    listed_by_cli,
    until,
)
from queries import timeline
from store.embedded import EmbeddedStore

TARGET_FRESH_S = 2.0
TARGET_TIMELINE_S = 0.5


def dupescope(*args: str, output: Path | None = None) -> float:
    """Seconds one `dupescope` command takes as a new process (it must succeed)."""
    started = time.perf_counter()
    with open(output or "/dev/null", "wb") as out:
        subprocess.run([sys.executable, "-m", "dupescope.cli", *args], cwd=ROOT, stdout=out,
                       stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - started


def children_peak_gb() -> float:
    """The peak RSS of the largest child process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20


def segments(folder: Path) -> tuple[int, int]:
    """(segments, of which awaiting compaction), as `dupescope status` reports them."""
    out = folder.parent / "status.json"
    subprocess.run([sys.executable, "-m", "dupescope.cli", "status", "--store", str(folder),
                    "--format", "json"], cwd=ROOT, stdout=out.open("wb"), check=False)
    status = json.loads(out.read_text())
    days = status.get("days", [])
    return (sum(int(d.get("segments", 0)) for d in days),
            sum(int(d.get("awaiting_compaction", 0)) for d in days))


def measure(work: Path, n: int, batch_events: int, rounds: int) -> dict[str, float]:
    folder = work / "store"
    source = work / "history.jsonl"
    started = time.perf_counter()
    workload.write_jsonl(source, n)
    print(f"\n[workload, {n:,} events] file {source.stat().st_size / 2**30:.2f} GB "
          f"written in {time.perf_counter() - started:.1f} s", flush=True)
    ingest = dupescope("ingest", str(source), "--store", str(folder))
    held, waiting = segments(folder)
    print(f"  ingest (compacts)     {ingest:7.1f} s, peak RSS {children_peak_gb():.2f} GB; "
          f"{held} segments, {waiting} awaiting compaction", flush=True)
    source.unlink()
    first = dupescope("duplicates", "--store", str(folder), "--format", "json",
                      output=work / "first.json")
    print(f"  first duplicates      {first:7.1f} s (derived state built from nothing)",
          flush=True)
    collector = CollectorProcess(str(folder))
    every, recent, keys = [], [], []
    try:
        for r in range(2 * rounds):
            since = ["--since", "1h"] if r >= rounds else []
            records = as_json_lines(Workload.batch(r, batch_events, n))[: batch_events - 6]
            key = dup_key(r)
            collector.post(records + duplicated_key(r, time.time() - 600))
            (recent if since else every).append(
                until(lambda k=key, a=since: listed_by_cli(folder, k, a)))
            keys.append(key)
    finally:
        collector.stop()
    process = [dupescope("timeline", key, "--store", str(folder), "--format", "json")
               for key in keys]
    store = EmbeddedStore(folder)
    try:
        timeline(store, keys[0])  # the process has opened the store once
        warm = []
        for key in keys:
            started = time.perf_counter()
            timeline(store, key)
            warm.append(time.perf_counter() - started)
    finally:
        store.close()
    held, waiting = segments(folder)
    figures = {"ingest": ingest, "first": first, "cli": statistics.median(every),
               "recent": statistics.median(recent), "timeline_process":
               statistics.median(process), "timeline": statistics.median(warm)}
    print(f"  fresh in duplicates   {figures['cli']:7.2f} s (median; "
          f"{', '.join(f'{s:.2f}' for s in every)})")
    print(f"  ... with --since 1h   {figures['recent']:7.2f} s (median; "
          f"{', '.join(f'{s:.2f}' for s in recent)})")
    print(f"  timeline, new process {figures['timeline_process']:7.2f} s (median; "
          f"{', '.join(f'{s:.2f}' for s in process)})")
    print(f"  timeline, in process  {figures['timeline']:7.3f} s (median)")
    print(f"  afterwards: {held} segments, {waiting} awaiting compaction", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000000",
                        help="comma-separated event counts")
    parser.add_argument("--batch", type=int, default=10_000, help="events in a new batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true",
                        help="leave the store in --workdir, to look at it afterwards")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    for n in (int(s) for s in args.sizes.split(",")):
        work = Path(tempfile.mkdtemp(prefix="dupescope-ingest-fresh-", dir=args.workdir))
        try:
            figures = measure(work, n, args.batch, args.rounds)
        finally:
            if args.keep:
                print(f"  kept the store in {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
        for what, key, target in (("duplicates", "cli", TARGET_FRESH_S),
                                  ("duplicates --since 1h", "recent", TARGET_FRESH_S),
                                  ("timeline (in process)", "timeline", TARGET_TIMELINE_S),
                                  ("timeline (new process)", "timeline_process",
                                   TARGET_TIMELINE_S)):
            print(f"workload {n:,}: {what}: {figures[key]:.2f} s (target under {target} s): "
                  f"{'ok' if figures[key] < target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
