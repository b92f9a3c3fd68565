"""Timeline and duplicates over the Collector's ClickHouse tables vs dupescope's own schema.

The same workload's spans go into chDB twice: as the exporter writes them (`otel_traces`,
Map layout), read with `chdb:///path?source=otel`, and decoded over OTLP into dupescope's
own `events` table (`chdb:///path`). Each side is timed cold (a fresh process state: the
refill of dupescope's events from the mapping, where there is one, and the derived build)
and warm (the same question again).

    python -m benchmarks otel_tables --spans 200000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from chdb import session

import sample_data
from collectors.arrow_batch import rows_to_table
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from queries import duplicates, timeline
from sample_data.clickhouse_exporter import CollectingExporter, insert, span_rows, traces_ddl
from sample_data.otlp import export_spans
from store.clickhouse import ChdbStore
from store.otel import OtelChdbStore, OtelSource

# Spans per target event of the workload model: about 0.8 at 4k events, 0.35 at 175k
# (executions carry more steps as the workload grows); --spans is approximate.
SPANS_PER_EVENT = 0.8


def build(folder: Path, spans: int) -> tuple[int, int]:
    """Both chDB folders for a workload of about `spans` spans; returns (spans, events)."""
    workload = sample_data.generate(seed=5, target_events=int(spans / SPANS_PER_EVENT))
    exporter = CollectingExporter()
    export_spans(workload, exporter)
    rows = [row for r in exporter.requests for row in decode_traces(r, Normaliser(), "otlp").rows]
    own = ChdbStore(str(folder / "own"))
    own.write(rows_to_table(rows))
    own.close()
    table_rows = span_rows(exporter.requests)
    s = session.Session(str(folder / "otel"))
    s.query("CREATE DATABASE otel")
    s.query(traces_ddl("otel"))
    insert(s, "otel.otel_traces", table_rows)
    s.close()
    return len(table_rows), len(rows)


def measure(open_store, key: str) -> dict[str, float]:
    store = open_store()
    try:
        started = time.perf_counter()
        found = duplicates(store)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        duplicates(store)
        warm = time.perf_counter() - started
        started = time.perf_counter()
        rows = timeline(store, key)
        line = time.perf_counter() - started
        started = time.perf_counter()
        timeline(store, key)
        line_warm = time.perf_counter() - started
    finally:
        store.close()
    return {"duplicates cold s": cold, "duplicates warm s": warm, "timeline s": line,
            "timeline warm s": line_warm, "keys": float(len(found)), "rows": float(len(rows))}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks otel_tables")
    parser.add_argument("--spans", type=int, default=200_000)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="dupescope-otel-bench-"))
    try:
        started = time.perf_counter()
        spans, events = build(folder, args.spans)
        print(f"{spans} spans ({events} events) built in {time.perf_counter() - started:.1f} s")
        probe = ChdbStore(str(folder / "own"))
        key = str(duplicates(probe)["key"].iloc[0])
        probe.close()
        sides = {
            "exporter tables": lambda: OtelChdbStore(str(folder / "otel"), OtelSource("otel")),
            "own schema": lambda: ChdbStore(str(folder / "own")),
        }
        for name, opener in sides.items():
            figures = measure(opener, key)
            print(f"{name:16} " + "  ".join(f"{k} {v:.2f}" for k, v in figures.items()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
