"""timeline.sql, computed in Python over a key's candidate rows.

`queries/sql/timeline.sql` is the definition: ClickHouse, chDB and `sql_timeline` run it,
and tests/test_timeline_rows.py holds this module to its answer, on hand-written cases and
on the model's sample, before and after compaction. This is not a second definition but
a faster evaluation of the same one, kept for a measured reason.

The embedded store hands the timeline a few dozen candidate rows (`key_rows`: the row
groups its lookup index names). Running timeline.sql itself over just those rows (an
in-memory DuckDB with them registered as `events`) was tried as the single path, and
measured again on 14 candidate rows on the 2-core machine while busy: 14-35 ms a lookup
(planning the window and the ASOF join; the optimizer off does not help), against
0.15-0.3 ms here, and 2-9 ms for the whole warm lookup including the index. The timeline
target is a warm lookup under 20 ms (benchmarks/timeline.py); the SQL alone would spend
it, so the grouping stays in Python and the narrowing stays in the store.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from store.arrow_values import int64s
from store.contract import PRODUCER_KINDS

#: The columns of timeline.sql's answer, in its order (execution_uid is computed).
COLUMNS: tuple[str, ...] = (
    "ts",
    "event",
    "execution_uid",
    "job_id",
    "delivery_attempt",
    "worker_id",
    "job_type",
    "idempotency_key",
    "resource_key",
    "queue",
    "lock_key",
    "lock_owner",
    "lock_ttl_ms",
    "visibility_timeout_ms",
    "service_version",
    "trace_id",
    "span_id",
    "attrs",
    "event_uid",
)
#: The columns of the timeline (`timeline_of_rows`, `queries.timeline`): timeline.sql's
#: and the execution's number after `execution_uid`.
ANSWER_COLUMNS: tuple[str, ...] = (*COLUMNS[:2], "execution", *COLUMNS[2:])
#: The columns the grouping reads; the rest are only carried through.
NEEDED: tuple[str, ...] = (
    "event_uid",
    "ts",
    "event",
    "job_id",
    "idempotency_key",
    "worker_id",
    "delivery_attempt",
    "execution_id",
)


def execution_numbers(uids: Sequence[str | None]) -> list[int | None]:
    """1, 2, ... per execution in order of first appearance; None where there is none.

    Rows come in time order, so an execution's first row is its start: this numbers the
    executions in the order they started.
    """
    order: dict[str, int] = {}
    numbers: list[int | None] = []
    for uid in uids:
        if uid is None:
            numbers.append(None)
        else:
            numbers.append(order.setdefault(uid, len(order) + 1))
    return numbers


def _matched(columns: dict[str, list[Any]], key: str) -> list[int]:
    """Rows of the key or of its jobs, one per event_uid (the earliest), as timeline.sql."""
    keys, jobs = columns["idempotency_key"], columns["job_id"]
    key_jobs = {job for k, job in zip(keys, jobs, strict=True) if k == key and job is not None}
    key_jobs.add(key)
    first: dict[str, int] = {}
    uids, ts = columns["event_uid"], columns["ts"]
    for i, (k, job) in enumerate(zip(keys, jobs, strict=True)):
        if k == key or job in key_jobs:
            kept = first.get(uids[i])
            if kept is None or ts[i] < ts[kept]:
                first[uids[i]] = i
    return list(first.values())


#: Kinds that are no step of an execution (queries/sql/fragments/loose_step.sql).
_NO_STEP = frozenset({"outbox_write", "enqueue", "enqueue_deduped", "deliver",
                      "worker_start", "worker_stop"})


def _loose(columns: dict[str, list[Any]], i: int) -> bool:
    """A step naming neither worker nor attempt (loose_step.sql): it joins its job's
    latest deliver on any worker."""
    return (columns["worker_id"][i] is None and columns["delivery_attempt"][i] is None
            and columns["execution_id"][i] is None and columns["job_id"][i] is not None
            and columns["event"][i] not in _NO_STEP)


def _execution_uids(columns: dict[str, list[Any]], matched: list[int]) -> dict[int, str | None]:
    """Each matched row's execution: its span's, its own deliver's, or the latest deliver
    of the same (job_id, worker_id, delivery_attempt) at or before it (the ASOF join); a
    step that names neither worker nor attempt, the latest of its job's on any worker."""
    events, ts, uids = columns["event"], columns["ts"], columns["event_uid"]
    spans = columns["execution_id"]

    def place(i: int) -> tuple[str, str, int]:
        attempt = columns["delivery_attempt"][i]
        return (
            columns["job_id"][i] or "",
            columns["worker_id"][i] or "",
            -1 if attempt is None else attempt,
        )

    delivers: dict[tuple[str, str, int], list[tuple[int, str, str]]] = {}
    for i in matched:
        if events[i] == "deliver":
            delivers.setdefault(place(i), []).append((ts[i], uids[i], spans[i] or uids[i]))
    of_job: dict[str, list[tuple[int, str, str]]] = {}
    for (job, _, _), found in delivers.items():
        of_job.setdefault(job, []).extend(found)
    starts: dict[tuple[str, str, int], list[int]] = {}
    for where, found in delivers.items():
        found.sort()
        starts[where] = [start for start, _, _ in found]
    job_starts: dict[str, list[int]] = {}
    for job, found in of_job.items():
        found.sort()
        job_starts[job] = [start for start, _, _ in found]
    executions: dict[int, str | None] = {}
    for i in matched:
        if events[i] in PRODUCER_KINDS:  # the producer's: in no execution (timeline.sql)
            executions[i] = None
        elif spans[i] is not None:
            executions[i] = spans[i]
        elif events[i] == "deliver":
            executions[i] = uids[i]
        elif _loose(columns, i):
            job = columns["job_id"][i]
            at = bisect.bisect_right(job_starts.get(job, []), ts[i]) - 1
            executions[i] = of_job[job][at][2] if at >= 0 else None
        else:
            where = place(i)
            at = bisect.bisect_right(starts.get(where, []), ts[i]) - 1
            executions[i] = delivers[where][at][2] if at >= 0 else None
    return executions


def _ordered(rows: pa.Table, key: str) -> tuple[list[int], list[str | None]]:
    """The positions in `rows` of the key's timeline, in its order (ts, then event_uid),
    and each one's execution_uid."""
    columns = {name: rows.column(name).to_pylist() for name in NEEDED if name != "ts"}
    columns["ts"] = rows.column("ts").cast(pa.int64()).to_pylist()
    matched = _matched(columns, key)
    executions = _execution_uids(columns, matched)
    matched.sort(key=lambda i: (columns["ts"][i], columns["event_uid"][i]))
    return matched, [executions[i] for i in matched]


def timeline_of_rows(rows: pa.Table, key: str) -> pa.Table:
    """timeline.sql's answer over `rows` (a superset of the key's rows), plus `execution`."""
    matched, uids = _ordered(rows, key)
    picked = rows.take(pa.array(matched, pa.int64()))
    arrays = [
        pa.array(uids, pa.string()) if name == "execution_uid" else picked.column(name)
        for name in COLUMNS
    ]
    table = pa.Table.from_arrays(arrays, names=list(COLUMNS))
    numbers = pa.array(execution_numbers(uids), pa.int64())
    return table.add_column(ANSWER_COLUMNS.index("execution"), "execution", numbers)


#: Where Arrow's timestamps count from.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timeline_records(rows: pa.Table, key: str) -> list[dict[str, Any]]:
    """`timeline_of_rows` as plain rows (columns ANSWER_COLUMNS, `ts` a UTC datetime),
    made without building Arrow arrays from Python values or converting a zoned timestamp
    through pyarrow: both import pandas (store/arrow_values.py)."""
    matched, uids = _ordered(rows, key)
    picked = rows.take(int64s(matched))
    ts = picked.column("ts").cast(pa.int64()).to_pylist()
    carried = picked.select([c for c in COLUMNS if c not in ("ts", "execution_uid")])
    numbers = execution_numbers(uids)
    made = []
    for row, at, uid, number in zip(carried.to_pylist(), ts, uids, numbers, strict=True):
        row.update(ts=_EPOCH + timedelta(microseconds=at), execution_uid=uid,
                   execution=number)
        made.append({c: row[c] for c in ANSWER_COLUMNS})
    return made
