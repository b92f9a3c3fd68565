"""Forensics of one key: its timeline, its executions, and the verdict on them.

The dashboard's timeline page and `dupescope timeline KEY` both answer "what happened to
this key, and why did it run twice?"; they take the answer from here so the page and the
terminal say the same sentence. `forensics_of` works on frames a caller already holds
(the dashboard caches the timeline and the `duplicates` answer per store snapshot);
`key_forensics` asks the store for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from queries.forensics import duplicates_of
from queries.key_executions import summarise
from queries.timeline import timeline as find_timeline
from queries.verdict import Verdict, verdict
from store.base import Store


@dataclass(frozen=True)
class KeyForensics:
    """What one key's timeline shows and what is concluded from it.

    `timeline` is `queries.timeline`'s frame (one row per event), `executions` its
    summary (queries/key_executions.py, one row per execution), `duplicate` the key's row
    of `queries.duplicates` (None when the key is not a duplicate there, or no answer was
    available), and `verdict` the sentence the page and the CLI show.
    """

    key: str
    timeline: pd.DataFrame
    executions: pd.DataFrame
    duplicate: dict[str, Any] | None
    verdict: Verdict


def names_on(timeline: pd.DataFrame, key: str) -> set[str]:
    """What `duplicates` may name the key by: the key itself or any idempotency key or
    job_id on its timeline (a job_id opens the timeline of its key, and `duplicates`
    names a key by its idempotency key, else its job_id)."""
    names = {key}
    for column in ("idempotency_key", "job_id"):
        if column in timeline:
            names.update(timeline[column].dropna())
    return names


def duplicate_row(
    duplicates: pd.DataFrame | None, timeline: pd.DataFrame, key: str
) -> dict[str, Any] | None:
    """The key's row of the `duplicates` answer, matched by any of `names_on`."""
    if duplicates is None or duplicates.empty:
        return None
    hits = duplicates[duplicates["key"].isin(names_on(timeline, key))]
    return {str(k): v for k, v in hits.iloc[0].to_dict().items()} if not hits.empty else None


def forensics_of(
    timeline: pd.DataFrame, duplicates: pd.DataFrame | None, key: str
) -> KeyForensics:
    """The forensics of `key` from its timeline and the store's `duplicates` answer
    (None where that answer could not be had: the verdict then says the cause is not
    classified)."""
    executions = summarise(timeline)
    row = duplicate_row(duplicates, timeline, key)
    return KeyForensics(key, timeline, executions, row, verdict(executions, row))


def key_forensics(store: Store, key: str) -> KeyForensics:
    """The forensics of `key` (an idempotency key or a job_id) in `store`.

    The `duplicates` rows are the unfiltered answer's the dashboard shows, so the verdict
    is the page's; only the rows of the names on the timeline are read, and only when
    the key has events.
    """
    timeline = find_timeline(store, key)
    duplicates = (duplicates_of(store, names_on(timeline, key)) if not timeline.empty
                  else None)
    return forensics_of(timeline, duplicates, key)
