"""Where a first read of the Collector's tables spends its time, statement by statement.

Builds `--spans` spans in the exporter's Map layout (benchmarks/otel_spans.py), reads them
from a fresh store (in one chunk, or in chunks of `--chunk-rows` as a first read does),
and prints the whole read's time, its spans a second, the CPU seconds it took (user and
system: on a shared virtual machine the same read's wall time varies by a fifth, mostly in
system time) and the statements that took longest (each timed as the store runs it): the
span stage, the append into `events`, the id index. `--runs` reads copies of the same
tables again, which gives the spread of one machine's figures; the copies are deleted
after the last run (about 2.8 GB each at 11.1M spans).

    python -m benchmarks otel_read_statements --spans 2000000 [--runs 2] [--chunk-rows N]
        [--resource sdk]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from chdb import session

from benchmarks import otel_spans
from benchmarks.common import CpuSpent
from sample_data.clickhouse_exporter import traces_ddl
from store.otel import OtelChdbStore, OtelSource
from store.otel_chunks import CHUNK_ROWS

#: `--chunk-rows` of a read in one chunk, whatever the table's size.
ONE_CHUNK = 10**12
#: `--resource`: what each span's ResourceAttributes hold.
RESOURCES = {"service": otel_spans.SERVICE_RESOURCE, "sdk": otel_spans.SDK_RESOURCE}


def build(folder: Path, spans: int, resource: dict[str, str] | None = None) -> int:
    """The exporter's table with at least `spans` spans, each with `resource`; how many."""
    s = session.Session(str(folder))
    s.query("CREATE DATABASE otel")
    s.query(traces_ddl("otel"))
    made = 0
    try:
        for rows, _ in otel_spans.batches(spans, resource=resource):
            otel_spans.insert(s, "otel.otel_traces", rows)
            made += rows.num_rows
    finally:
        s.close()
    return made


def read_once(folder: Path, chunk_rows: int,
              cpu: CpuSpent) -> tuple[float, dict[str, float]]:
    """A first read of `folder` in chunks of `chunk_rows`: (seconds, seconds by
    statement), its CPU in `cpu`."""
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    store.chunk_rows = chunk_rows
    spent: dict[str, float] = defaultdict(float)
    command = store.command

    def timed(sql: str, params: dict[str, Any] | None = None) -> None:
        started = time.perf_counter()
        command(sql, params)
        lines = [line for line in sql.splitlines() if line and not line.startswith("--")]
        spent[" ".join(" ".join(lines).split())[:90]] += time.perf_counter() - started

    store.command = timed  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        with cpu:
            store.refresh()
        return time.perf_counter() - started, spent
    finally:
        store.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel_read_statements")
    parser.add_argument("--spans", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--top", type=int, default=5, help="statements listed per run")
    parser.add_argument("--chunk-rows", type=int, default=ONE_CHUNK,
                        help=f"rows a chunk holds at most (a first read's: {CHUNK_ROWS:,}); "
                             "by default the read is one chunk")
    parser.add_argument("--resource", choices=RESOURCES, default="service",
                        help="each span's resource: the service's name alone, or the 15 "
                             "keys an OpenTelemetry Python SDK with its process and OS "
                             "detectors gives (every one of them kept in each event's attrs)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dupescope-otel-statements-"))
    try:
        built = root / "built"
        resource = RESOURCES[args.resource]
        spans = build(built, args.spans, resource)
        chunks = ("one chunk" if args.chunk_rows >= ONE_CHUNK
                  else f"chunks of at most {args.chunk_rows:,} rows")
        print(f"{spans:,} spans in {chunks}, a resource of {len(resource)} keys", flush=True)
        walls: list[float] = []
        for run in range(1, args.runs + 1):
            copy = root / f"run-{run}"
            shutil.copytree(built, copy, symlinks=True)
            cpu = CpuSpent()
            seconds, spent = read_once(copy, args.chunk_rows, cpu)
            walls.append(seconds)
            print(f"\nrun {run}: {seconds:.1f} s, {spans / seconds:,.0f} spans/s; "
                  f"{cpu.describe(spans, 'spans')}")
            for sql, took in sorted(spent.items(), key=lambda kv: -kv[1])[:args.top]:
                print(f"  {took:7.2f} s  {sql}")
            # Each run's copy stays until every run is done: an ext4 file system without a
            # journal (this machine's) skips, at a buffer-cache lookup each, the inodes
            # deleted in the last minute or more when it allocates one, so a read right
            # after deleting the last run's tens of thousands of files paid for each in
            # system time (up to 40 s at 11.1M spans, against 23-31 s with the copies kept).
        if len(walls) > 1:
            middle = statistics.median(walls)
            print(f"\n{len(walls)} runs: {min(walls):.1f} to {max(walls):.1f} s, median "
                  f"{middle:.1f} s = {spans / middle:,.0f} spans/s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
