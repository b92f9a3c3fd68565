"""What the id index (events_ids, store/clickhouse.py ids_ddl) costs a write on chDB.

Batches of the workload model's events are written into two chDB databases: a store's
`events` with its id index, and the same `events` table with no index. The difference
per event is what the index costs a write; a derivation reads the index, so it must stay
cheap for every batch.

`--prefill N` writes N events into both first (in batches of a million), so that the
batches are timed against an index of that size, as a live store's are.

    python -m benchmarks index_writes [--batches 20] [--batch 10000] [--prefill N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time

import pyarrow as pa

from benchmarks.forensics_speed import canonical
from sample_data import fast
from store.clickhouse import ChdbStore, events_ddl


class _Bare(ChdbStore):
    """`events` alone: the baseline without the index."""

    def _upgrade(self) -> None:
        return None


def _write_all(store: ChdbStore, batches: list[pa.Table]) -> float:
    started = time.perf_counter()
    for batch in batches:
        store.write(batch)
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks index_writes")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=10_000, help="events a batch")
    parser.add_argument("--prefill", type=int, default=0,
                        help="events written into both before the timed batches")
    args = parser.parse_args(argv)
    batches, offset = [], args.prefill
    for batch in fast.arrow_batches(args.batches * args.batch, seed=17,
                                    batch_rows=args.batch):
        batches.append(canonical(batch, offset))
        offset += batch.num_rows
    events = sum(b.num_rows for b in batches)
    folder = tempfile.mkdtemp(prefix="dupescope-index-bench-")
    try:
        indexed = ChdbStore(folder, database="indexed")
        bare_db = "bare"
        for statement in events_ddl(bare_db):
            indexed.command(statement)
        bare = _Bare.__new__(_Bare)
        bare.path, bare.database, bare._session = folder, bare_db, indexed._session
        filled = 0
        if args.prefill:
            started = time.perf_counter()
            for part in fast.arrow_batches(args.prefill, seed=16, batch_rows=1_000_000):
                part = canonical(part, filled)
                indexed.write(part)
                bare.write(part)
                filled += part.num_rows
            print(f"prefilled {filled:,} events into both in "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
        # Alternate, so that load from elsewhere on the machine falls on both alike.
        with_index = without = 0.0
        for batch in batches:
            with_index += _write_all(indexed, [batch])
            without += _write_all(bare, [batch])
        per_event = (with_index - without) / events * 1e6
        print(f"{len(batches)} batches, {events:,} events")
        print(f"write with the index:    {with_index / len(batches) * 1000:8.1f} ms a batch")
        print(f"write without the index: {without / len(batches) * 1000:8.1f} ms a batch")
        print(f"the index costs {per_event:.2f} us an event, "
              f"{(with_index - without) / len(batches) * 1000:.1f} ms a batch")
        rows = indexed.execute("SELECT count() AS n FROM indexed.events_ids")["n"][0]
        written = events + filled
        print(f"index rows: {int(rows):,} ({int(rows) / written:.2f} an event written)")
        indexed.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
