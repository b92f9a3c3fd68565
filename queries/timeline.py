"""The per-key timeline: every event of a key, grouped by execution."""

from __future__ import annotations

import pandas as pd

from queries.loader import run
from queries.timeline_rows import execution_numbers, timeline_of_rows
from store.base import Store, to_frame


def timeline(store: Store, key: str) -> pd.DataFrame:
    """Events of `key` (an idempotency key or a job_id) in time order.

    Adds `execution`, numbered 1, 2, ... in the order the executions started (null for
    producer-side events such as enqueue), so a reader can follow each run of the body.
    """
    rows = store.key_rows(key)
    if rows is not None:
        # The store found the key's rows through an index it keeps (the embedded store's
        # lookup index); timeline.sql's grouping then runs over those few rows in Python,
        # without a SQL engine's cost.
        return to_frame(timeline_of_rows(rows, key))
    return sql_timeline(store, key)


def sql_timeline(store: Store, key: str) -> pd.DataFrame:
    """The timeline as timeline.sql answers it over the store's whole `events`."""
    frame = run(store, "timeline", key=key)
    uids = [None if pd.isna(uid) else uid for uid in frame["execution_uid"]]
    numbers = pd.Series(execution_numbers(uids), index=frame.index, dtype="Int64")
    frame.insert(2, "execution", numbers)
    return frame
