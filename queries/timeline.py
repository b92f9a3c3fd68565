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
    frame = run(store, "timeline", key=key)
    starts = (
        frame.dropna(subset=["execution_uid"])
        .groupby("execution_uid", sort=False)["ts"]
        .min()
        .sort_values(kind="stable")
    )
    order = {uid: number for number, uid in enumerate(starts.index, start=1)}
    frame.insert(2, "execution", frame["execution_uid"].map(order).astype("Int64"))
    return frame
