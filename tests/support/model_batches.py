"""The workload model's events as store batches with uids of their own: a store larger
than a small memory budget, built fast."""

from __future__ import annotations

import pyarrow as pa

from sample_data import fast
from store.schema import EVENTS_SCHEMA


def model_batches(n: int) -> list[pa.Table]:
    """The workload model's first `n` events in four batches, in the store's schema."""
    batches, offset = [], 0
    for batch in fast.arrow_batches(n, batch_rows=n // 4):
        uids = pa.array([f"m-{offset + i}" for i in range(batch.num_rows)])
        columns = {**{name: batch.column(name) for name in batch.column_names},
                   "event_uid": uids}
        batches.append(pa.Table.from_arrays(
            [columns.get(f.name, pa.nulls(batch.num_rows, f.type)) for f in EVENTS_SCHEMA],
            schema=EVENTS_SCHEMA,
        ))
        offset += batch.num_rows
    return batches
