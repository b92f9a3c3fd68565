"""Many event rows, built a column at a time: for merges long enough to watch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.schema import EVENTS_SCHEMA


def many_rows(n: int) -> pa.Table:
    """`n` rows of one day, in EVENTS_SCHEMA, built a column at a time."""
    numbers = pa.array(np.arange(n)).cast(pa.string())
    columns = {
        "event_uid": pc.binary_join_element_wise("u-", numbers, ""),
        "ts": pa.array(np.arange(n) + 1_764_504_000_000_000, pa.int64()),
        "event": pa.array(["deliver"] * n),
        "job_id": pc.binary_join_element_wise("j-", numbers, ""),
        "idempotency_key": pc.binary_join_element_wise("k-", numbers, ""),
    }
    return pa.table(
        [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type)
         for f in EVENTS_SCHEMA],
        schema=EVENTS_SCHEMA,
    )
