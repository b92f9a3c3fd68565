"""`timeline KEY` latency at N and 10N events vs `LC_ALL=C grep -F KEY` (issue 2).

The store is written straight as Arrow batches through `EmbeddedStore.write` and then
compacted, as a long-running collector leaves it. Cold is the first query of a fresh
store object (new DuckDB connection, no Parquet metadata cached; the OS page cache is
not dropped, which needs root). Warm is the median of repeated queries. grep runs over
the N-event JSON-lines file of the same workload, in the same run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import DEFAULT_DIR, jsonl_file, timed
from benchmarks.workload import EVENTS_PER_KEY, arrow_batches, key_of
from queries import timeline
from store.embedded import EmbeddedStore


def build_store(folder: Path, events: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    store = EmbeddedStore(folder)
    seconds = timed(lambda: [store.write(batch) for batch in arrow_batches(events, chunk=500_000)])
    compact = timed(store.compact)
    print(f"  store of {events:,} events: written in {seconds:.0f} s, compacted in {compact:.0f} s")


def latency(folder: Path, key: str, repeats: int = 15) -> tuple[float, float, int]:
    """(cold ms, warm ms, rows) of `timeline(key)`."""
    store = EmbeddedStore(folder)
    start = time.perf_counter()
    rows = len(timeline(store, key))
    cold = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        timeline(store, key)
        warm.append((time.perf_counter() - start) * 1000)
    store.close()
    return cold, statistics.median(warm), rows


def grep_ms(path: Path, key: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["grep", "-F", key, str(path)],
        env={"LC_ALL": "C"},
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return (time.perf_counter() - start) * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks timeline", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--big-events", type=int, default=None, help="default: 10 x --events")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    big = args.big_events or 10 * args.events
    key = key_of(args.events // EVENTS_PER_KEY // 2)
    source = jsonl_file(args.dir, args.events)
    grep = min(grep_ms(source, key) for _ in range(2))
    results = {}
    for events in (args.events, big):
        folder = args.dir / f"timeline-store-{events}"
        build_store(folder, events)
        results[events] = latency(folder, key)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"timeline {key!r}; grep -F over {args.events:,} events: {grep:.0f} ms")
    base_warm = results[args.events][1]
    for events, (cold, warm, rows) in results.items():
        print(
            f"  {events:>13,} events: {rows} rows, warm {warm:7.1f} ms, cold {cold:7.1f} ms, "
            f"grep/warm {grep / warm:6.0f}x, warm vs N {warm / base_warm:4.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
