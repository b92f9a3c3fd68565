"""`dupescope ingest` vs polars `read_ndjson` -> Parquet, shape by shape.

Every figure comes from this run. For each shape of `sample_data/log_shapes.py` (aliases,
mixed timestamp forms, empty and nested attrs, extra fields, field order, long unicode
strings, CRLF, gzip), the whole command (`dupescope ingest` in its own process, into a
fresh embedded store) and then polars reading the same file and writing Parquet; the
ratio is polars' time over dupescope's (1.0x: as fast as polars).

`--workload` measures the benchmark workload file instead, against DuckDB `read_json`
(explicit columns: `read_json_auto` stops on mixed whole/fractional seconds),
`pyarrow.json` and polars, in this process.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.json as pj
import pyarrow.parquet as pq

from benchmarks.common import DEFAULT_DIR, jsonl_file, rate, timed
from collectors.files import ingest_files
from sample_data import log_shapes as shapes
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


def shape_file(folder: Path, shape: str, lines: int) -> Path:
    """A shape's file of `lines` lines, written once per size and reused across runs."""
    folder = folder / f"shapes-{lines}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / shapes.file_name(shape)
    if not path.exists():
        partial = path.with_name(path.name + ".partial")
        seconds = timed(lambda: shapes.write(shape, lines, partial))
        partial.rename(path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB) in {seconds:.0f} s", flush=True)
    return path


def _dupescope() -> list[str]:
    script = Path(sys.executable).with_name("dupescope")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from dupescope.cli import main; main()"]


_PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """Make this process the parent of every process its commands leave behind.

    The command's workers are forked by a fork server that the command does not wait for:
    without this, the CPU time of the server and its workers would go uncounted.
    """
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_orphans() -> None:
    """Wait for every adopted process, so its CPU time is in RUSAGE_CHILDREN."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def command_ingest(source: Path, store: Path) -> tuple[float, int, int]:
    """Seconds, rows stored and lines rejected of `dupescope ingest` on one file."""
    shutil.rmtree(store, ignore_errors=True)
    _adopt_orphans()
    start = time.perf_counter()
    done = subprocess.run(
        [*_dupescope(), "ingest", "--quiet", "--store", str(store), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    _reap_orphans()
    summary = re.search(r"(\d+) events stored .*?; (\d+) rejected", done.stderr)
    if done.returncode or summary is None:
        raise SystemExit(f"dupescope ingest {source} failed ({done.returncode}):\n{done.stderr}")
    return seconds, int(summary[1]), int(summary[2])


def _writable(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A column Parquet can hold: an object that is always empty (`{}`) becomes null."""
    if not isinstance(dtype, pl.Struct):
        return column
    if not dtype.fields:
        return pl.lit(None, pl.Boolean)
    return pl.struct(
        [_writable(column.struct.field(f.name), f.dtype).alias(f.name) for f in dtype.fields]
    )


def polars_parquet(source: Path, target: Path) -> str:
    """polars' read of the file written as Parquet; says which schema inference it took."""
    note = ""
    try:
        frame = pl.read_ndjson(source)
    except Exception:  # noqa: BLE001 - a type first seen after the first 100 lines
        frame = pl.read_ndjson(source, infer_schema_length=None)
        note = "full schema inference"
    frame.select(_writable(pl.col(n), t).alias(n) for n, t in frame.schema.items()).write_parquet(
        target
    )
    return note


def settle() -> None:
    """Write back what the last run left dirty (untimed), so the next one does not pay it.

    Polars' Parquet file is written without an fsync; dupescope fsyncs each segment. Left
    to the kernel, the previous run's hundreds of MB of dirty pages were written back
    during the next command, which was made to write them back itself (long_unicode's
    ingest: 9.6 s and 17.4 CPU s after polars' write of the file before it, 7.2 s and 13.6
    CPU s after a sync).
    """
    os.sync()


def shapes_main(folder: Path, lines: int, names: list[str]) -> int:
    files = {name: shape_file(folder, name, lines) for name in names}
    work = folder / "ingest-shapes-out"
    work.mkdir(parents=True, exist_ok=True)
    print(f"ingest of {lines:,} lines per shape: dupescope ingest (whole command) vs polars")
    print(
        f"  {'shape':18} {'MB':>6} {'dupescope s':>12} {'polars s':>9} {'ratio':>7}"
        f"   cpu s: {'dupescope':>9} {'polars':>7} {'ratio':>7}"
    )
    worst = float("inf")
    for name, source in files.items():
        cpu: dict[str, float] = {}
        settle()
        with _cpu(cpu, "ours"):
            ours, rows, rejected = command_ingest(source, work / "store")
        if rows != lines or rejected:
            raise SystemExit(f"{name}: {rows} rows stored, {rejected} rejected of {lines}")
        settle()
        start = time.perf_counter()
        with _cpu(cpu, "theirs"):
            note = polars_parquet(source, work / "polars.parquet")
        theirs = time.perf_counter() - start
        worst = min(worst, theirs / ours)
        size = source.stat().st_size / 1e6
        print(
            f"  {name:18} {size:6.0f} {ours:12.2f} {theirs:9.2f} {theirs / ours:6.2f}x"
            f"          {cpu['ours']:9.2f} {cpu['theirs']:7.2f} "
            f"{cpu['theirs'] / cpu['ours']:6.2f}x" + (f"  (polars: {note})" if note else ""),
            flush=True,
        )
    print(f"  lowest ratio (wall time) {worst:.2f}x")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ingest", description=__doc__)
    parser.add_argument("--lines", type=int, default=2_000_000, help="lines per shape")
    parser.add_argument(
        "--shapes", default=",".join(shapes.SHAPES), help="comma-separated; default: all"
    )
    parser.add_argument("--workload", action="store_true", 
                        help="the workload file against DuckDB, pyarrow and polars")
    parser.add_argument("--events", type=int, default=1_000_000, help="with --workload")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if not args.workload:
        names = [n for n in args.shapes.split(",") if n]
        unknown = [n for n in names if n not in shapes.SHAPES]
        if unknown:
            parser.error(f"unknown shapes {unknown}; known: {', '.join(shapes.SHAPES)}")
        return shapes_main(args.dir, args.lines, names)
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
