"""One key's timeline and verdict as plain rows: what `dupescope timeline` prints.

The same answer as queries/key_forensics.py (the timeline page's), from the same
definitions (queries/timeline_rows.py, queries/key_executions.py, queries/verdict.py),
without a data frame on the way: a command run once per question pays for its imports,
and pandas alone costs about as much as the whole lookup on the embedded store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from queries.derived import answer_of_keys
from queries.duplicates_shape import named_causes
from queries.key_executions import Row, frame_rows, summarise_rows
from queries.timeline_rows import timeline_records
from queries.verdict import Verdict, verdict_of_rows
from store.base import Store


@dataclass(frozen=True)
class KeyVerdict:
    """`timeline`: the key's events in time order (the columns of `queries.timeline`,
    plain values); `verdict`: the sentence the timeline page shows."""

    key: str
    timeline: list[Row]
    verdict: Verdict


def timeline_rows(store: Store, key: str) -> list[Row]:
    """`queries.timeline` of `key` as rows: from the store's lookup index where it keeps
    one, else from timeline.sql over `events`."""
    rows = store.key_rows(key)
    if rows is not None:
        return timeline_records(rows, key)
    from queries.timeline import sql_timeline

    return frame_rows(sql_timeline(store, key))


def names_on_rows(timeline: Sequence[Row], key: str) -> set[str]:
    """What `duplicates` may name the key by (queries.key_forensics.names_on)."""
    names = {key}
    for row in timeline:
        names.update(row[c] for c in ("idempotency_key", "job_id") if row.get(c) is not None)
    return names


def duplicate_of(store: Store, names: Iterable[str]) -> Row | None:
    """The first row of the unfiltered `duplicates` that names one of `names`, shaped for
    the verdict (`named_causes`); None where there is none."""
    wanted = sorted(set(names))
    for raw in answer_of_keys(store, "answer_duplicates", wanted).to_pylist():
        if raw["key"] in wanted:
            return named_causes(raw)
    return None


def key_verdict(store: Store, key: str) -> KeyVerdict:
    """The timeline and verdict of `key` (an idempotency key or a job_id) in `store`;
    the `duplicates` answer is read only for the names on the timeline, and only when the
    key has events."""
    timeline = timeline_rows(store, key)
    duplicate = duplicate_of(store, names_on_rows(timeline, key)) if timeline else None
    return KeyVerdict(key, timeline, verdict_of_rows(summarise_rows(timeline), duplicate))
