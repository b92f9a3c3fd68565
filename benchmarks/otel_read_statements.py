"""Where a first read of the Collector's tables spends its time, statement by statement.

Builds `--spans` spans in the exporter's Map layout (benchmarks/otel_spans.py), reads them
from a fresh store in one chunk, and prints the whole read's time, its spans a second, and
the statements that took longest (each timed as the store runs it): the span stage, the
append into `events`, the id index. `--runs` reads copies of the same tables again.

    python -m benchmarks otel_read_statements --spans 2000000 [--runs 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from chdb import session

from benchmarks import otel_spans
from sample_data.clickhouse_exporter import traces_ddl
from store.otel import OtelChdbStore, OtelSource


def build(folder: Path, spans: int) -> int:
    """The exporter's table with at least `spans` spans; how many."""
    s = session.Session(str(folder))
    s.query("CREATE DATABASE otel")
    s.query(traces_ddl("otel"))
    made = 0
    try:
        for rows, _ in otel_spans.batches(spans):
            otel_spans.insert(s, "otel.otel_traces", rows)
            made += rows.num_rows
    finally:
        s.close()
    return made


def read_once(folder: Path) -> tuple[float, dict[str, float]]:
    """A first read of `folder` in one chunk: (seconds, seconds by statement)."""
    store = OtelChdbStore(str(folder), OtelSource("otel"))
    store.chunk_rows = 10**12
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
        store.refresh()
        return time.perf_counter() - started, spent
    finally:
        store.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel_read_statements")
    parser.add_argument("--spans", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--top", type=int, default=5, help="statements listed per run")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dupescope-otel-statements-"))
    try:
        built = root / "built"
        spans = build(built, args.spans)
        print(f"{spans:,} spans in one chunk", flush=True)
        for run in range(1, args.runs + 1):
            copy = root / f"run-{run}"
            shutil.copytree(built, copy, symlinks=True)
            seconds, spent = read_once(copy)
            print(f"\nrun {run}: {seconds:.1f} s, {spans / seconds:,.0f} spans/s")
            for sql, took in sorted(spent.items(), key=lambda kv: -kv[1])[:args.top]:
                print(f"  {took:7.2f} s  {sql}")
            shutil.rmtree(copy, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
