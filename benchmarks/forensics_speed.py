"""Time the forensic queries on an embedded store of N model events (cold build, warm).

    python benchmarks/forensics_speed.py 10000000 /tmp/bench-store
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from queries import duplicates, lock_overruns  # noqa: E402
from sample_data import fast  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402
from store.schema import EVENTS_SCHEMA  # noqa: E402


def _canonical(batch: pa.Table, offset: int) -> pa.Table:
    """The model's batches carry the contract fields; add the store's bookkeeping ones."""
    n = batch.num_rows
    columns = {name: batch.column(name) for name in batch.column_names}
    columns["event_uid"] = pa.array([f"bench-{offset + i}" for i in range(n)])
    arrays = [
        columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in EVENTS_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def timed(label: str, call) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    rows = len(call())
    print(f"{label}: {time.perf_counter() - started:.3f} s ({rows} rows)", flush=True)


def main(n_events: int, folder: str) -> None:
    store = EmbeddedStore(folder)
    if not store.segments():
        started = time.perf_counter()
        offset = 0
        for batch in fast.arrow_batches(n_events):
            store.write(_canonical(batch, offset))
            offset += batch.num_rows
        store.compact()
        print(f"load {n_events}: {time.perf_counter() - started:.1f} s", flush=True)
    timed("count(*) raw", lambda: store.execute("SELECT count(*) FROM events"))
    timed("duplicates cold (builds derived tables)", lambda: duplicates(store))
    for _ in range(3):
        timed("duplicates warm", lambda: duplicates(store))
        timed("lock_overruns warm", lambda: lock_overruns(store))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
