"""`timeline KEY` latency at N and 10N events vs `LC_ALL=C grep -F KEY`.

The workload is the model's (`sample_data/fast.py`): copies of one modelled block, so
10M events span ~80 days and 100M ~2 years, as a long-kept store does. The store is
written straight as Arrow batches through `EmbeddedStore.write` and then compacted (which
writes the lookup index), as a long-running collector leaves it. Cold is the first query
of a fresh store object (index, files and decoded row groups opened anew; the OS page
cache is not dropped, which needs root). Warm is the median of repeated queries.
grep runs over the N-event JSON-lines file of the same workload, in the same run.
`--big-events 0` measures N alone (the 10N store takes long to build).

Targets: warm under 20 ms at N, grep/warm at least 100x, warm at 10N at most 2x warm at N.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import timed
from queries import timeline
from sample_data import fast
from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA

DEFAULT_DIR = Path("/tmp/bench-timeline")
TARGET_WARM_MS = 20.0
TARGET_VS_GREP = 100.0
TARGET_GROWTH = 2.0


def canonical(batch: pa.Table, offset: int) -> pa.Table:
    """The model's contract columns plus the store's own (event_uid, the rest null)."""
    n = batch.num_rows
    numbers = pa.array(np.arange(offset, offset + n)).cast(pa.string())
    columns = {name: batch.column(name) for name in batch.column_names}
    columns["event_uid"] = pc.binary_join_element_wise("bench-", numbers, "")
    arrays = [
        columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in EVENTS_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def build_store(folder: Path, events: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    store = EmbeddedStore(folder)

    def write() -> None:
        offset = 0
        for batch in fast.arrow_batches(events):
            store.write(canonical(batch, offset))
            offset += batch.num_rows

    seconds = timed(write)
    compact = timed(store.compact)
    print(
        f"  store of {events:,} events, {len(store.days())} days: written in {seconds:.0f} s, "
        f"compacted and indexed in {compact:.0f} s",
        flush=True,
    )


def sample_keys(events: int) -> list[str]:
    """A producer-retry key (two job_ids) and one of its job_ids, from the middle copy."""
    block = fast.base_block(7)
    copy = events // len(block.events) // 2
    row = next(r for r in block.truth["duplicates"] if len(r["job_ids"]) > 1)
    suffix = f".{copy:07d}"
    return [row["key"] + suffix, row["job_ids"][0] + suffix]


def latency(folder: Path, key: str, repeats: int = 25) -> tuple[float, float, int]:
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
    parser.add_argument(
        "--big-events", type=int, default=None, help="default: 10 x --events; 0: N alone"
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the stores")
    args = parser.parse_args(argv)
    big = 10 * args.events if args.big_events is None else args.big_events
    sizes = [args.events] if big in (0, args.events) else [args.events, big]
    keys = sample_keys(args.events)
    args.dir.mkdir(parents=True, exist_ok=True)
    source = args.dir / f"fast-{args.events}.jsonl"
    if not source.exists():
        fast.write_jsonl(source, args.events)
    grep_ms(source, keys[0])  # warm the page cache
    grep = statistics.median(grep_ms(source, keys[0]) for _ in range(3))
    results: dict[tuple[int, str], tuple[float, float, int]] = {}
    for events in sizes:
        folder = args.dir / f"timeline-store-{events}"
        if not (args.keep and folder.exists()):
            build_store(folder, events)
        for key in keys:
            results[(events, key)] = latency(folder, key)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    if not args.keep:
        source.unlink()
    print(f"grep -F over {args.events:,} events ({source.name}): {grep:.0f} ms")
    for key in keys:
        base_warm = results[(args.events, key)][1]
        print(f"timeline {key!r}")
        for events in sizes:
            cold, warm, rows = results[(events, key)]
            print(
                f"  {events:>13,} events: {rows} rows, warm {warm:6.1f} ms "
                f"(target < {TARGET_WARM_MS:.0f}), cold {cold:6.1f} ms, "
                f"grep/warm {grep / warm:5.0f}x (target >= {TARGET_VS_GREP:.0f}), "
                f"vs N {warm / base_warm:4.2f}x (target <= {TARGET_GROWTH:.0f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
