"""Timeline and duplicates over the Collector's ClickHouse tables vs dupescope's own schema.

The same workload goes into one chDB folder twice: as `otel_traces` rows the way the
exporter writes them (Map layout, built column-wise by benchmarks/otel_spans.py: an
execution a span, its steps as span events), read with `?source=otel`; and as the contract
events those spans carry, in dupescope's own `events` table (database `own`). For each:

- **cold**: a fresh store object's first `duplicates` (for the exporter's tables the first
  read of them into dupescope's events, then the derived build), then warm;
- **timeline** of a duplicated key, cold and warm;
- **new batch**: `--batch` more spans inserted (on the own side, their events written), then
  the next `duplicates`: what a live store pays for new data; on the exporter's side the
  batch right after the first read, then a **steady batch** after that;
- for the exporter's tables, the **first read** alone (chunked, newest day first:
  `--chunk-rows`), its spans a second, and when the newest chunk was in `events`;
- **the last hour first**: on a database of dupescope's own of its own, a fresh store's
  first `duplicates --since` the table's newest span less an hour, read that hour first
  (`read_recent_first`) with the whole table as backlog: what a person asking about the
  last hour waits on a table never read.

    python -m benchmarks otel_tables --spans 10000000 [--batch 10000] [--chunk-rows N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
from chdb import session

from benchmarks import otel_spans
from benchmarks.common import CpuSpent
from benchmarks.forensics_speed import canonical
from queries import duplicates, timeline
from sample_data.clickhouse_exporter import traces_ddl
from store.base import Store
from store.clickhouse import ChdbStore
from store.otel import OtelChdbStore, OtelReading, OtelSource
from store.otel_chunks import CHUNK_ROWS
from store.otel_progress import ReadProgress


def build(folder: Path, spans: int) -> tuple[int, int]:
    """The exporter's table and dupescope's own, filled alike; (spans, events)."""
    s = session.Session(str(folder))
    s.query("CREATE DATABASE otel")
    s.query(traces_ddl("otel"))
    own = ChdbStore(str(folder), database="own")
    made = events = 0
    try:
        for rows, carried in otel_spans.batches(spans):
            otel_spans.insert(s, "otel.otel_traces", rows)
            own.write(canonical(carried, events))
            made += rows.num_rows
            events += carried.num_rows
            print(f"  {made:,} spans ({events:,} events)", flush=True)
    finally:
        own.close()
        s.close()
    return made, events


def last_hour_first(folder: Path) -> tuple[float, int, datetime]:
    """Seconds from opening a fresh store to `duplicates` of the table's last hour, read
    first; (seconds, duplicates, since)."""
    started = time.perf_counter()
    store = OtelChdbStore(str(folder), OtelSource("otel", own_db="otel_last_hour"))
    try:
        newest = store.arrow("SELECT max(Timestamp) AS t FROM otel.otel_traces")["t"][0]
        since = newest.as_py() - timedelta(hours=1)
        store.read_recent_first(since)
        found = duplicates(store, since=since)
        return time.perf_counter() - started, len(found), since
    finally:
        store.close()


def new_batch(spans: int) -> tuple[pa.Table, pa.Table]:
    """About `spans` spans of keys of their own (another seed of the model)."""
    rows, events = next(otel_spans.batches(spans, chunk_events=spans * 3, seed=99))
    return rows, events


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(store: Store, key: str | None, add: Callable[[], None],
            steady: Callable[[], None] | None = None,
            read_cpu: CpuSpent | None = None) -> tuple[dict[str, float], str]:
    """Figures of `store` (the timeline of `key`, else of its first duplicated key); the
    CPU of a first read in `read_cpu`."""
    started = time.perf_counter()
    figures: dict[str, float] = {}
    if isinstance(store, OtelReading):
        with read_cpu or CpuSpent():
            store.refresh()
        figures["first read"] = time.perf_counter() - started
    found = duplicates(store)
    figures["cold"] = time.perf_counter() - started
    print(f"  {store.describe()}: cold {figures['cold']:.1f} s", flush=True)
    figures["warm"] = timed(lambda: duplicates(store))
    key = key or str(found["key"].iloc[0])
    figures |= {
        "timeline": timed(lambda: timeline(store, key)),
        "timeline warm": timed(lambda: timeline(store, key))}
    add()
    figures["new batch"] = timed(lambda: duplicates(store))
    if steady is not None:
        steady()
        figures["steady batch"] = timed(lambda: duplicates(store))
    return figures, key


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel_tables")
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000, help="spans in the new batch")
    parser.add_argument("--chunk-rows", type=int, default=CHUNK_ROWS,
                        help="rows a chunk of the first read holds at most")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="dupescope-otel-bench-"))
    try:
        started = time.perf_counter()
        spans, events = build(folder, args.spans)
        print(f"{spans:,} spans ({events:,} events) built in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
        seconds, found, since = last_hour_first(folder)
        print(f"the last hour first (since {since:%Y-%m-%d %H:%M:%S}): {found} duplicates "
              f"after {seconds:.1f} s", flush=True)
        rows, carried = new_batch(args.batch)
        own = ChdbStore(str(folder), database="own")
        try:
            own_figures, key = measure(own, None,
                                       lambda: own.write(canonical(carried, events)))
        finally:
            own.close()
        steady_rows, _ = next(otel_spans.batches(args.batch, chunk_events=args.batch * 3,
                                                 seed=98))
        exporter = OtelChdbStore(str(folder), OtelSource("otel"))
        exporter.chunk_rows = args.chunk_rows
        chunks: list[tuple[float, ReadProgress]] = []
        read_cpu = CpuSpent()
        opened = time.perf_counter()
        exporter.progress.follow(lambda p: chunks.append(
            (time.perf_counter() - opened, ReadProgress(**vars(p)))))
        try:
            figures, _ = measure(
                exporter, key,
                lambda: otel_spans.insert(exporter._session, "otel.otel_traces", rows),
                lambda: otel_spans.insert(exporter._session, "otel.otel_traces", steady_rows),
                read_cpu)
        finally:
            exporter.close()
        print(f"\n{'':16}" + "".join(f"{k:>15}" for k in figures))
        for name, found in (("exporter tables", figures), ("own schema", own_figures)):
            print(f"{name:16}" + "".join(f"{found[k]:14.2f}s" if k in found else f"{'-':>15}"
                                          for k in figures))
        print(f"\nnew batch: {rows.num_rows:,} spans ({carried.num_rows:,} events); "
              f"steady batch: {steady_rows.num_rows:,} spans")
        first = [(at, p) for at, p in chunks if p.chunks_read >= 1]
        if first:
            at, p = first[0]
            print(f"first read: {spans:,} spans in {figures['first read']:.1f} s = "
                  f"{spans / figures['first read']:,.0f} spans/s, {p.chunks_total} chunk(s) "
                  f"of at most {args.chunk_rows:,} rows; the newest chunk (from day "
                  f"{p.partition}) in events after {at:.1f} s; "
                  f"{read_cpu.describe(spans, 'spans')}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
