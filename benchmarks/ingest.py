"""Ingest of an N-event JSON-lines file vs plain readers of the same file (issue 2).

Every figure comes from this run: `dupescope ingest` into the embedded store, then DuckDB
`read_json` (explicit columns: `read_json_auto` stops on mixed whole/fractional seconds),
`pyarrow.json` and polars `read_ndjson`, each writing Parquet. The ratio is to the fastest.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.json as pj
import pyarrow.parquet as pq

from benchmarks.common import DEFAULT_DIR, jsonl_file, rate, timed
from collectors.files import ingest_files
from store.embedded import EmbeddedStore

_DUCKDB_COLUMNS = {
    "ts": "VARCHAR",
    **{
        name: "VARCHAR"
        for name in (
            "event job_id job_type idempotency_key resource_key queue worker_id lock_key "
            "lock_owner service_version msg host level region logger"
        ).split()
    },
    **{n: "BIGINT" for n in ("delivery_attempt", "lock_ttl_ms", "visibility_timeout_ms", "pid")},
}


def duckdb_reader(source: Path, target: Path) -> None:
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT * FROM read_json($path, format = 'newline_delimited', "
        f"columns = {_DUCKDB_COLUMNS!r})) TO '{target}' (FORMAT parquet)",
        {"path": str(source)},
    )
    con.close()


def pyarrow_reader(source: Path, target: Path) -> None:
    pq.write_table(pj.read_json(source), target)


def polars_reader(source: Path, target: Path) -> None:
    pl.read_ndjson(source).write_parquet(target)


@contextmanager
def _cpu(into: dict[str, float], name: str) -> Iterator[None]:
    """CPU seconds of this process and its finished children (ingest's workers) inside.

    On a machine others load, wall time says how much CPU was left over; CPU time per
    event says what each reader costs, whatever the load.
    """

    def used() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    start = used()
    yield
    into[name] = used() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ingest", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    source = jsonl_file(args.dir, args.events)
    work = args.dir / "ingest-out"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    store = EmbeddedStore(work / "store")
    report = None

    def ours() -> None:
        nonlocal report
        report = ingest_files([str(source)], store)

    figures: dict[str, float] = {}
    cpu: dict[str, float] = {}
    with _cpu(cpu, "dupescope ingest"):
        figures["dupescope ingest"] = timed(ours)
    assert report is not None and report.rows == args.events, report
    for name, reader in (
        ("duckdb read_json", duckdb_reader),
        ("pyarrow.json", pyarrow_reader),
        ("polars read_ndjson", polars_reader),
    ):
        with _cpu(cpu, name):
            figures[name] = timed(lambda r=reader, n=name: r(source, work / f"{n.split()[0]}.pq"))
    fastest = min(seconds for name, seconds in figures.items() if name != "dupescope ingest")
    print(f"ingest of {args.events:,} events ({source.stat().st_size / 1e9:.2f} GB)")
    for name, seconds in figures.items():
        print(
            f"  {name:20} {rate(args.events, seconds)}  ratio to fastest plain reader "
            f"{fastest / seconds:5.2f}  cpu {cpu[name] / args.events * 1e6:5.2f} µs/event"
        )
    ours_vs = {n: s_ / figures["dupescope ingest"] for n, s_ in figures.items()}
    print(
        "  dupescope / each reader: "
        + ", ".join(f"{n} {r:.2f}x" for n, r in ours_vs.items() if n != "dupescope ingest")
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
