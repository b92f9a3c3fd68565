"""The per-key timeline: every event of a key, grouped by execution."""

from __future__ import annotations

import pandas as pd

from queries.loader import run
from store.base import Store


def timeline(store: Store, key: str) -> pd.DataFrame:
    """Events of `key` (an idempotency key or a job_id) in time order.

    Adds `execution`, numbered 1, 2, ... in the order the executions started (null for
    producer-side events such as enqueue), so a reader can follow each run of the body.
    """
    rows_of = getattr(store, "key_rows", None)
    if rows_of is not None:
        # The embedded store finds the key's rows through its lookup index; the same SQL
        # then runs over those rows alone instead of over every segment.
        store = store.over_rows(rows_of(key))
    frame = run(store, "timeline", key=key)
    # Rows come in time order, so an execution's first row is its start: numbering the
    # executions in order of first appearance numbers them in the order they started.
    started = pd.unique(frame["execution_uid"].dropna())
    order = {uid: number for number, uid in enumerate(started, start=1)}
    frame.insert(2, "execution", frame["execution_uid"].map(order).astype("Int64"))
    return frame
