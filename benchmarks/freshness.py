"""What a live store pays for new data: freshness and the cost of one batch, at N events.

For each size N (model events, fast mode) in one run:

- **full build**: the derived tables from scratch, what a first load or a repair pays;
- **absorb**: a fixed batch of `--batch` new events written to the store, then the
  derivation the batch makes every reader pay (`queries.derived.ensure`), median of rounds;
- **freshness**: the batch posted to a running `dupescope collect`; from its 200 until the
  batch's duplicated key is listed by `dupescope duplicates` (a new process printing into
  a file, as a cron job runs it) and by the forensic call behind the dashboard's
  duplicates page, in a process that had answered before the batch arrived. The command
  is timed twice: listing every duplicate kept (hundreds of MB of JSON at 100M events),
  and with `--since 1h`, as a job that reports new duplicates would run it.

Targets (live forensics at any size): absorbing a batch costs at most 2x at the largest N
what it costs at the smallest; freshness under 3 s at every N.

With `--store chdb` the same on chDB (ClickHouse's engine in-process). chDB serves one
folder to one process, so no collector or second process can share it: freshness there is
from the batch's write until the dashboard's question lists its key, in the same process.

    python -m benchmarks.freshness [--sizes 1000000,10000000] [--batch 10000] [--rounds 3]
                                   [--store embedded|chdb] [--keep DIR]
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks import workload
from benchmarks.alert_latency import CollectorProcess
from benchmarks.forensics_speed import canonical, load
from collectors.arrow_batch import rows_to_table
from collectors.jsonlines import decode_lines
from collectors.normalise import Normaliser
from queries import derived, duplicates
from sample_data import fast
from store.base import Store
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 2.0
TARGET_FRESH_S = 3.0
POLL_S = 0.05
GIVE_UP_S = 600.0


class Model:
    """The workload model's events (sample_data.fast)."""

    name = "model"

    @staticmethod
    def load(store: Store, n: int) -> float:
        return load(store, n)

    @staticmethod
    def batch(round_no: int, events: int, n: int) -> pa.Table:
        return canonical(batch(round_no, events), offset=n + round_no * events)


class Workload:
    """The benchmarks' own generator (benchmarks/workload.py), independent of the model:
    eight events a key, a fifth of the keys delivered twice."""

    name = "workload"

    @staticmethod
    def load(store: Store, n: int) -> float:
        started = time.perf_counter()
        for part in workload.arrow_batches(n):
            store.write(part)
        if isinstance(store, EmbeddedStore):
            store.compact()
        return time.perf_counter() - started

    @staticmethod
    def batch(round_no: int, events: int, n: int) -> pa.Table:
        # Each run's batches in keys of their own: a store kept (--keep) for another run
        # would otherwise get the same keys again, a resend, not new data.
        slot = int(RUN, 16) % 1000 * 100 + round_no
        return next(workload.arrow_batches(events, start=n + slot * events))


GENERATORS = {g.name: g for g in (Model, Workload)}


#: Tells this run's new keys from those of an earlier run into a store kept (`--keep`).
RUN = uuid.uuid4().hex[:6]


def batch(round_no: int, events: int) -> pa.Table:
    """`events` model events under keys and job ids of their own, dated after the rest."""
    model = next(fast.arrow_batches(events, seed=1000 + round_no, batch_rows=events))
    prefix = pa.scalar(f"fresh{RUN}-{round_no}-")
    columns = {name: model.column(name) for name in model.column_names}
    for name in ("idempotency_key", "job_id", "resource_key", "lock_key"):
        columns[name] = pc.binary_join_element_wise(prefix, columns[name], "")
    columns["ts"] = pc.add(columns["ts"], pa.scalar(3600 * 24 * (round_no + 1) * 10**6,
                                                   pa.duration("us")))
    return pa.table(columns)


def duplicated_key(round_no: int, start: float) -> list[dict[str, Any]]:
    """One key run twice, both runs with the side effect: what the freshness probes look for."""
    key = dup_key(round_no)
    rows: list[dict[str, Any]] = []
    for attempt in (1, 2):
        common = {"job_id": f"{key}-job", "job_type": "billing.charge", "idempotency_key": key,
                  "delivery_attempt": attempt, "worker_id": f"w{attempt}"}
        at = start + attempt * 40
        rows += [
            {"ts": _iso(at), "event": "deliver", "visibility_timeout_ms": 30_000, **common},
            {"ts": _iso(at + 1), "event": "side_effect", **common},
            {"ts": _iso(at + 2), "event": "ack", **common},
        ]
    return rows


def dup_key(round_no: int) -> str:
    return f"fresh-dup-{RUN}-{round_no}"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + "Z"


def as_json_lines(table: pa.Table) -> list[dict[str, Any]]:
    """Contract records of a model table (what a worker would log)."""
    records = []
    for row in table.to_pylist():
        record = {k: v for k, v in row.items() if v is not None and k != "attrs"}
        record["ts"] = row["ts"].isoformat()
        records.append(record)
    return records


def seconds(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def until(found: Callable[[], bool]) -> float:
    """Seconds until `found()` holds (polled), or GIVE_UP_S."""
    started = time.perf_counter()
    while not found():
        if time.perf_counter() - started > GIVE_UP_S:
            return float("inf")
        time.sleep(POLL_S)
    return time.perf_counter() - started


def listed_by_cli(folder: Path, key: str, options: list[str]) -> bool:
    """Whether `dupescope duplicates --format json` lists `key`, printed into a file as a
    cron job keeps it. Read through a pipe into this process instead, the 0.97 GB of
    JSON of the 100M-event store took 2.9-4.0 s to read even from `cat`: a figure of
    the probe, not of the command."""
    with tempfile.TemporaryFile(dir=folder.parent) as out:
        subprocess.run(
            [sys.executable, "-m", "dupescope.cli", "duplicates", "--store", str(folder),
             "--format", "json", *options],
            cwd=ROOT, stdout=out, stderr=subprocess.DEVNULL, timeout=GIVE_UP_S,
        )
        if os.fstat(out.fileno()).st_size == 0:
            return False
        with mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ) as printed:
            return printed.find(key.encode()) >= 0


def listed_by_dashboard(store: EmbeddedStore, key: str) -> bool:
    """The dashboard's duplicates page asks `queries.duplicates` of the current snapshot."""
    store.forget_snapshot()
    # Compared in place: a set of 2.5M keys (100M events) took half a second a poll.
    return bool((duplicates(store)["key"] == key).any())


def measure(
    folder: Path, n: int, batch_events: int, rounds: int, generator: type[Model] | type[Workload]
) -> dict[str, float]:
    reused = (folder / "events").exists()
    store = EmbeddedStore(folder)
    if reused:
        print(f"\n[{generator.name}, {n:,} events] reused {folder} (loaded and built before)",
              flush=True)
        full = float("nan")
        derived.ensure(store)  # whatever an earlier run left underived
    else:
        print(f"\n[{generator.name}, {n:,} events] load {generator.load(store, n):.1f} s "
              f"(write + compact)", flush=True)
        shutil.rmtree(folder / "derived", ignore_errors=True)
        full = seconds(lambda: derived.ensure(store))
        print(f"  full build            {full:7.2f} s", flush=True)
    absorbs = []
    for r in range(rounds):
        store.write(generator.batch(r, batch_events, n))
        store.forget_snapshot()
        absorbs.append(seconds(lambda: derived.ensure(store)))
    absorb = statistics.median(absorbs)
    print(f"  absorb {batch_events:,} events  {absorb:7.2f} s "
          f"(median of {rounds}: {', '.join(f'{a:.2f}' for a in absorbs)})", flush=True)
    duplicates(store)  # the dashboard process has answered before the batch arrives
    collector = CollectorProcess(str(folder))
    cli, recent, page = [], [], []
    try:
        # The command lists every duplicate kept, or (--since) those of the last hour, as
        # a cron job that reports new duplicates would; each beside the page's question.
        for r in range(rounds, 3 * rounds):  # keys of their own, beyond the absorb rounds'
            since = ["--since", "1h"] if r >= 2 * rounds else []
            records = as_json_lines(generator.batch(r, batch_events, n))[: batch_events - 6]
            key = dup_key(r)
            collector.post(records + duplicated_key(r, time.time() - 600))
            with ThreadPoolExecutor(2) as probes:  # both from the same 200
                by_page = probes.submit(until, lambda k=key: listed_by_dashboard(store, k))
                by_cli = probes.submit(until, lambda k=key, a=since: listed_by_cli(folder, k, a))
                page.append(by_page.result())
                (recent if since else cli).append(by_cli.result())
    finally:
        collector.stop()
        store.close()
    figures = {"full": full, "absorb": absorb, "cli": statistics.median(cli),
               "recent": statistics.median(recent), "page": statistics.median(page)}
    print(f"  fresh in the dashboard {figures['page']:6.2f} s  (median; "
          f"{', '.join(f'{s:.2f}' for s in page)})")
    print(f"  fresh in duplicates   {figures['cli']:7.2f} s  (median; "
          f"{', '.join(f'{s:.2f}' for s in cli)}; a new process each poll, beside the page's)")
    print(f"  ... with --since 1h   {figures['recent']:7.2f} s  (median; "
          f"{', '.join(f'{s:.2f}' for s in recent)})", flush=True)
    return figures


def measure_chdb(
    folder: Path, n: int, batch_events: int, rounds: int, generator: type[Model] | type[Workload]
) -> dict[str, float]:
    reused = folder.exists()
    store = ChdbStore(str(folder))
    if reused:
        print(f"\n[{generator.name}, {n:,} events, chDB] reused {folder} (loaded and built "
              "before)", flush=True)
        full = float("nan")
        derived.ensure(store)
    else:
        print(f"\n[{generator.name}, {n:,} events, chDB] load {generator.load(store, n):.1f} s",
              flush=True)
        full = seconds(lambda: derived.ensure(store))
        print(f"  full build            {full:7.2f} s", flush=True)
    absorbs, page = [], []
    try:
        for r in range(rounds):
            store.write(generator.batch(r, batch_events, n))
            absorbs.append(seconds(lambda: derived.ensure(store)))
        duplicates(store)
        for r in range(rounds, 2 * rounds):
            key = dup_key(r)
            fresh = generator.batch(r, batch_events - 6, n)
            store.write(fresh)
            store.write(canonical_records(duplicated_key(r, time.time() - 600)))
            written = time.perf_counter()  # as a collector's 200 follows its writes
            until(lambda k=key: bool((duplicates(store)["key"] == k).any()))  # in place
            page.append(time.perf_counter() - written)
    finally:
        store.close()
    absorb = statistics.median(absorbs)
    print(f"  absorb {batch_events:,} events  {absorb:7.2f} s "
          f"(median of {rounds}: {', '.join(f'{a:.2f}' for a in absorbs)})", flush=True)
    figures = {"full": full, "absorb": absorb, "page": statistics.median(page)}
    print(f"  fresh in the dashboard {figures['page']:6.2f} s  (median; "
          f"{', '.join(f'{s:.2f}' for s in page)}; from the write, in the writing process)",
          flush=True)
    return figures


def canonical_records(records: list[dict[str, Any]]) -> pa.Table:
    """Contract records as the collector would store them (its decoder and normaliser)."""
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, start=1)]
    return rows_to_table(decode_lines(lines, Normaliser(), "benchmark").rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000",
                        help="comma-separated event counts, smallest first")
    parser.add_argument("--batch", type=int, default=10_000, help="events in a new batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--generators", default="model,workload",
                        help="whose events fill the store: model (sample_data), workload "
                             "(benchmarks/workload.py), or both")
    parser.add_argument("--store", choices=("embedded", "chdb"), default="embedded")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each loaded store under this folder and reuse it in the "
                             "next run (a store of 100M events takes half an hour to load "
                             "and build); the batches of each run stay in it")
    args = parser.parse_args(argv)
    run_one = measure_chdb if args.store == "chdb" else measure
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"dupescope freshness: batches of {args.batch:,} events into stores of "
          f"{', '.join(f'{n:,}' for n in sizes)} events")
    for name in args.generators.split(","):
        generator = GENERATORS[name]
        results = {}
        for n in sizes:
            if args.keep is not None:  # kept for the next run, which reuses it
                kept = args.keep / f"{args.store}-{name}-{n}"
                results[n] = run_one(kept, n, args.batch, args.rounds, generator)
                continue
            work = Path(tempfile.mkdtemp(prefix="dupescope-fresh-", dir=args.workdir))
            try:
                results[n] = run_one(work / "store", n, args.batch, args.rounds, generator)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        small, large = results[sizes[0]], results[sizes[-1]]
        ratio = large["absorb"] / small["absorb"]
        print(f"\n{name}: absorb at {sizes[-1]:,} / at {sizes[0]:,}: {ratio:.1f}x "
              f"(target at most {TARGET_RATIO:.0f}x): "
              f"{'ok' if ratio <= TARGET_RATIO else 'MISSED'}")
        for n, figures in results.items():
            for what, figure in (("the dashboard", "page"), ("duplicates", "cli"),
                                 ("duplicates --since 1h", "recent")):
                if figure not in figures:  # chDB: no second process
                    continue
                seconds_ = figures[figure]
                print(f"{name}: freshness at {n:,} in {what}: {seconds_:.2f} s (target under "
                      f"{TARGET_FRESH_S:.0f} s): "
                      f"{'ok' if seconds_ < TARGET_FRESH_S else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
