"""Time the forensic questions at scale against the pandas analysis a user would write.

    python -m benchmarks.forensics_speed --events 10000000 [--pandas-events 1000000]

In one run: build an embedded store and a chDB store of N model events (fast mode), time the
derived build, `duplicates` (with causes) and `lock_overruns` cold and warm on each, then
read the same events as JSON lines with pandas and do the same analysis (executions per
key, side effects, harmful, first cause). pandas needs minutes and many GiB at 10M lines,
so it reads the first M lines and its time is scaled by N/M (said in the output). Warm
figures are the median of several calls: the machine may be shared.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks import pandas_baseline
from queries import duplicates, lock_overruns
from sample_data import fast
from store.base import Store
from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA

WARM_REPEATS = 5
TARGET_WARM_S = 1.0
TARGET_RATIO = 100.0


def canonical(batch: pa.Table, offset: int) -> pa.Table:
    """The model's batches carry the contract fields; add the store's bookkeeping ones."""
    n = batch.num_rows
    columns = {name: batch.column(name) for name in batch.column_names}
    columns["event_uid"] = pa.array([f"bench-{offset + i}" for i in range(n)])
    arrays = [
        columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in EVENTS_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def load(store: Store, n_events: int) -> float:
    """Write N model events into `store` (compacting an embedded one); seconds taken."""
    started = time.perf_counter()
    offset = 0
    for batch in fast.arrow_batches(n_events):
        store.write(canonical(batch, offset))
        offset += batch.num_rows
    if isinstance(store, EmbeddedStore):
        store.compact()
    return time.perf_counter() - started


def seconds(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    answer = call()
    return time.perf_counter() - started, answer


def warm(call: Callable[[], Any]) -> float:
    return statistics.median(seconds(call)[0] for _ in range(WARM_REPEATS))


def time_store(label: str, store: Store) -> dict[str, float]:
    """Cold (first call: builds the derived tables) and warm timings of the two questions."""
    build, found = seconds(lambda: duplicates(store))
    figures = {
        "duplicates_cold": build,
        "duplicates_warm": warm(lambda: duplicates(store)),
        "lock_overruns_cold": seconds(lambda: lock_overruns(store))[0],
        "lock_overruns_warm": warm(lambda: lock_overruns(store)),
    }
    overruns = lock_overruns(store)
    print(f"\n[{label}] {len(found):,} duplicate keys "
          f"({int(found['harmful'].sum()):,} harmful), {len(overruns):,} lock overruns")
    print(f"  duplicates    cold {build:7.2f} s (first query: builds the derived tables)")
    print(f"  duplicates    warm {figures['duplicates_warm']:7.3f} s (median of {WARM_REPEATS})")
    print(f"  lock_overruns cold {figures['lock_overruns_cold']:7.3f} s (tables already built)")
    print(f"  lock_overruns warm {figures['lock_overruns_warm']:7.3f} s (median of {WARM_REPEATS})")
    return figures


def embedded_reuse(folder: Path) -> float:
    """A fresh process's first `duplicates` on a store whose build is already persisted."""
    store = EmbeddedStore(folder)
    try:
        return seconds(lambda: duplicates(store))[0]
    finally:
        store.close()


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--pandas-events", type=int, default=1_000_000,
                        help="lines pandas reads (its time is scaled to --events)")
    parser.add_argument("--store", type=Path, default=None,
                        help="embedded store folder to reuse (built there if empty)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the benchmark's files go (a temp folder, removed after)")
    parser.add_argument("--no-chdb", action="store_true")
    args = parser.parse_args(argv)
    n = args.events
    work = Path(tempfile.mkdtemp(prefix="dupescope-bench-", dir=args.workdir))
    try:
        run(args, n, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, n: int, work: Path) -> None:
    print(f"dupescope forensics benchmark: {n:,} events (fast mode of the workload model)")
    folder = args.store or work / "embedded"
    embedded = EmbeddedStore(folder)
    if not embedded.segments():
        print(f"load embedded store: {load(embedded, n):.1f} s (write + compact)")
    shutil.rmtree(folder / "derived", ignore_errors=True)  # time a cold build
    results = {"embedded": time_store("embedded store (Parquet + DuckDB)", embedded)}
    embedded.close()
    reuse = embedded_reuse(folder)
    print(f"  duplicates in a new process, build persisted: {reuse:.3f} s")
    if not args.no_chdb:
        from store.clickhouse import ChdbStore

        chdb = ChdbStore(str(work / "chdb"))
        print(f"\nload chDB store: {load(chdb, n):.1f} s")
        results["chdb"] = time_store("chDB", chdb)
        chdb.close()

    m = min(args.pandas_events, n)
    # The first M lines of the N-event file are the M-event file: write only what is read.
    path = fast.write_jsonl(work / "events.jsonl", m)
    timing = pandas_baseline.run(path, m)
    scale = n / timing.events
    total = (timing.read_s + timing.analyse_s) * scale
    print(f"\n[pandas over JSON lines] read {timing.events:,} lines in {timing.read_s:.1f} s "
          f"({timing.events / timing.read_s:,.0f} lines/s), analysis {timing.analyse_s:.1f} s; "
          f"{timing.duplicate_keys:,} duplicate keys ({timing.harmful_keys:,} harmful)")
    if scale != 1:
        print(f"  scaled linearly to {n:,} events (x{scale:.1f}): {total:.1f} s "
              f"(pandas ran on the first {m:,} lines only)")
    else:
        print(f"  total {total:.1f} s")

    print("\nsummary (targets: warm < 1 s, >= 100x faster than pandas)")
    for name, figures in results.items():
        for question in ("duplicates", "lock_overruns"):
            warm_s = figures[f"{question}_warm"]
            ratio = total / warm_s
            print(f"  {name:8} {question:13} warm {warm_s:6.3f} s "
                  f"[{verdict(warm_s < TARGET_WARM_S)}]  pandas/dupescope {ratio:8.0f}x "
                  f"[{verdict(ratio >= TARGET_RATIO)}]")
        cold = figures["duplicates_cold"]
        print(f"  {name:8} duplicates    cold {cold:6.1f} s (with build)  "
              f"pandas/dupescope {total / cold:8.1f}x")


if __name__ == "__main__":
    main()
