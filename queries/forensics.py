"""The forensic questions as Python calls: what the dashboard, the CLI and alerting use.

Each function runs one named query of the library (over the derived executions, built
once per store snapshot) and returns a pandas DataFrame shaped the same on every store:
times as UTC timestamps, counts as int64, flags as bool, lists as sorted Python lists.
Filters select executions: `job_type`, `queue`, and `since`/`until` on an execution's
start (datetime, pandas Timestamp or ISO 8601 text; naive times are UTC).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from derive import ordered
from derive.catalogue import UNFILTERED as _UNFILTERED
from derive.defaults import SKEW_TOLERANCE_MS, STAMPEDE_MIN_EXECUTIONS, STAMPEDE_WINDOW_US
from queries.derived import (
    Mark,
    answer_changes,
    answer_of_keys,
    narrowed,
    query,
    query_arrow,
)
from queries.duplicates_shape import CAUSE_LISTS, CAUSES, DUPLICATE_COLUMNS, FIRST_CAUSE
from queries.duplicates_table import Time
from queries.duplicates_table import filters as _filters
from queries.lint import lint_findings
from store.base import Store, to_frame

#: Every execution filter unset (the kept answers' parameters).
UNFILTERED: dict[str, Any] = dict(_UNFILTERED)

#: For each bit mask of CAUSES, the cause a duplicate is named by (an array to index).
_FIRST_CAUSE = np.array(FIRST_CAUSE, dtype=object)


def _shape(frame: pd.DataFrame, *, flags: tuple[str, ...] = ()) -> pd.DataFrame:
    """One frame shape for every engine: `*_us` -> UTC timestamps, flags -> bool."""
    frame = frame.copy()
    renames = {}
    for column in list(frame.columns):
        if column.endswith("_us") and column not in ("bucket_us", "window_start_us"):
            frame[column] = pd.to_datetime(frame[column].astype("Float64"), unit="us", utc=True)
            renames[column] = column.removesuffix("_us")
        elif column in ("bucket_us", "window_start_us"):
            frame[column] = pd.to_datetime(frame[column].astype("Int64"), unit="us", utc=True)
            renames[column] = column.removesuffix("_us")
        elif _is_decimal(frame[column]):
            # DuckDB sums integers into HUGEINT, which arrives as Decimal.
            frame[column] = frame[column].astype("float64")
            if frame[column].notna().all() and (frame[column] % 1 == 0).all():
                frame[column] = frame[column].astype("int64")
        elif column in flags:
            frame[column] = frame[column].fillna(False).astype(bool)
        elif pd.api.types.is_integer_dtype(frame[column].dtype):
            # Whole columns become plain int64; a column with gaps stays nullable Int64.
            if not frame[column].isna().any():
                frame[column] = frame[column].astype("int64")
    return frame.rename(columns=renames)


def _is_decimal(series: pd.Series) -> bool:
    if series.dtype != object:
        return False
    present = series.dropna()
    return not present.empty and isinstance(present.iloc[0], Decimal)


def sorted_lists(lists: pa.ChunkedArray) -> list[list[Any]]:
    """Each row's list of values without nulls, sorted (a null list: []), as Python lists.

    Sorted by Arrow for all rows at once: a sort per row took 0.7 s for the 605k keys of
    a store of 100M events."""
    array = lists.combine_chunks()
    values = pc.list_flatten(array)
    parents = pc.list_parent_indices(array)
    present = pc.is_valid(values)
    flat = pa.table({"row": parents.filter(present), "value": values.filter(present)})
    flat = flat.sort_by([("row", "ascending"), ("value", "ascending")])
    counts = np.bincount(flat["row"].to_numpy(), minlength=len(array))
    offsets = pa.array(np.concatenate(([0], np.cumsum(counts))), pa.int64())
    rebuilt = pa.LargeListArray.from_arrays(offsets, flat["value"].combine_chunks())
    listed: list[list[Any]] = rebuilt.to_pylist()
    return listed


_EXECUTION_FLAGS = (
    "had_side_effect",
    "idempotency_hit",
    "lock_contended",
    "occ_conflict",
    "lost_worker",
    "lock_expired_while_running",
    "cause_visibility_timeout",
    "cause_worker_crash",
    "cause_broker_redelivery",
    "cause_retry_after_failure",
)


def executions(store: Store, **filters: Any) -> pd.DataFrame:
    """Every execution with timing (`start`, `end`, `duration_ms`), outcome (`terminal`:
    ack/nack/fail/none), what it did (`had_side_effect`, `idempotency_hit`,
    `lock_contended`, `occ_conflict`) and its lock (`lock_key`, `lock_owner`,
    `lock_valid_until`, `visibility_timeout_ms`)."""
    frame = _shape(query(store, "executions", **_filters(**filters)), flags=_EXECUTION_FLAGS)
    return frame.rename(columns={"execution_uid": "execution_id"})


def duplicates(
    store: Store,
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> pd.DataFrame:
    """Keys (idempotency key, else job_id) with more than one execution.

    Columns: key, job_type, queue, executions, side_effects (executions that ran the
    effect), harmful (two or more did; NA when no run reported anything of its effect),
    outcome (`harmful`, `absorbed`, or `unknown`: no run emitted side_effect,
    idempotency_hit, lock_contended, occ_conflict or commit), cause (the first of CAUSES
    that applies, else `unknown`), causes (all that apply), job_ids, first_ts, last_ts,
    and the lock findings lock_expired_while_running, overlapped, split_brain.
    """
    bound = _filters(job_type, queue, since, until)
    if bound != UNFILTERED or narrowed(store):
        return _duplicates_frame(query_arrow(store, "duplicates", **bound))
    return _every_duplicate(store)


def duplicates_of(store: Store, keys: Iterable[str]) -> pd.DataFrame:
    """The rows of the unfiltered `duplicates` of these keys alone: what one key's
    verdict reads, at the cost of its keys, not of every duplicate the store holds."""
    return _duplicates_frame(answer_of_keys(store, "answer_duplicates", sorted(set(keys))))


#: Per store, the unfiltered duplicates as of a mark of its derived state: a process
#: that asks again (the dashboard, each refresh) pays for the keys batches replaced since.
_EVERY_DUPLICATE: weakref.WeakKeyDictionary[Store, tuple[Mark, pd.DataFrame]] = (
    weakref.WeakKeyDictionary())
_EVERY_DUPLICATE_LOCK = threading.Lock()


def _every_duplicate(store: Store) -> pd.DataFrame:
    """Every duplicate, from the frame this process made before where it can: the rows of
    the keys replaced since in place of theirs. Replacing a key's row by its row now is
    harmless when done twice, so a frame made from a newer state than its mark says is
    brought up to date correctly too."""
    with _EVERY_DUPLICATE_LOCK:
        held = _EVERY_DUPLICATE.get(store)
    changes = answer_changes(store, "answer_duplicates", held[0] if held else None)
    if held is not None and changes.mark == held[0]:
        frame = held[1]
    elif held is not None and changes.keys is not None and changes.rows is not None:
        frame = replaced_in_order(held[1], changes.keys, _duplicates_frame(changes.rows))
    else:
        frame = _duplicates_frame(query_arrow(store, "duplicates", **UNFILTERED))
    if changes.mark is not None:
        with _EVERY_DUPLICATE_LOCK:
            _EVERY_DUPLICATE[store] = (changes.mark, frame)
    # Copy-on-write (pandas 3): a caller's change copies what it changes, and the frame
    # held here stays as it was; a deep copy cost 0.27 s at 2.5M duplicates.
    return frame.copy(deep=False)


def replaced_in_order(frame: pd.DataFrame, keys: frozenset[str],
                      rows: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the rows of `keys` replaced by `rows`, in the query's order (first_ts,
    then key): the rows are put in their places in the ordered frame (derive/ordered.py),
    which is not sorted again, and the frame is taken from once."""
    replaced = pc.is_in(pa.array(frame["key"]), value_set=pa.array(sorted(keys), pa.string()))
    kept = np.flatnonzero(~np.asarray(replaced.to_numpy(zero_copy_only=False), bool))
    rows = rows.sort_values(["first_ts", "key"], kind="stable", ignore_index=True)
    if not len(kept) or frame["first_ts"].dtype != rows["first_ts"].dtype:
        # The frame of no rows is the shape of an empty answer (its columns typed as one);
        # times of another unit are compared by pandas.
        both = rows if not len(kept) else pd.concat([frame.take(kept), rows],
                                                    ignore_index=True)
        return both.sort_values(["first_ts", "key"], kind="stable", ignore_index=True)
    keys_of = frame["key"]
    at = ordered.places(
        _times(frame["first_ts"])[kept], _times(rows["first_ts"]), rows["key"].tolist(),
        lambda lo, hi: keys_of.take(kept[lo:hi]).tolist())
    order = ordered.merged(kept, at, len(frame) + np.arange(len(rows)))
    pieces = []
    for start, stop in zip(*(ids.tolist() for ids in ordered.runs(order, len(frame))),
                           strict=True):
        pieces.append(frame.iloc[start:stop] if start < len(frame)
                      else rows.iloc[start - len(frame):stop - len(frame)])
    return pd.concat(pieces, ignore_index=True)


def _times(column: pd.Series) -> np.ndarray:
    """A time column as int64 in its unit, a missing time last (as the query puts it)."""
    values = np.asarray(column.array.asi8)
    return np.where(column.isna().to_numpy(), ordered.MISSING, values)


def _duplicates_frame(answer: pa.Table) -> pd.DataFrame:
    """The `duplicates` answer's rows as the frame `duplicates` returns."""
    job_ids = sorted_lists(answer.column("job_ids"))
    raw = to_frame(answer.drop_columns(["job_ids"]))
    flags = (*CAUSES, "lock_expired_while_running", "overlapped", "split_brain")
    frame = _shape(raw, flags=flags)
    # True, False, or NA where the outcome is unknown (no run reported its effect).
    frame["harmful"] = frame["harmful"].astype("boolean")
    frame["outcome"] = frame["outcome"].astype(str)
    # Tens of thousands of keys at scale: name their causes from a bit mask (32 patterns).
    mask = sum(frame[cause].to_numpy(dtype="int64") << bit for bit, cause in enumerate(CAUSES))
    mask = np.asarray(mask, dtype="int64")
    frame["causes"] = [list(CAUSE_LISTS[m]) for m in mask.tolist()]
    frame["cause"] = _FIRST_CAUSE[mask]
    frame["job_ids"] = job_ids
    frame = frame.rename(columns={"first": "first_ts", "last": "last_ts"})
    return frame[DUPLICATE_COLUMNS].reset_index(drop=True)


def duplicates_over_time(
    store: Store, bucket: timedelta | str = "1h", **filters: Any
) -> pd.DataFrame:
    """Per time bucket and job type: keys, duplicate_keys, extra_executions, harmful,
    absorbed, unknown (a key counts in the bucket of its first execution)."""
    width = pd.Timedelta(bucket)
    bucket_us = int(width.value // 1_000)
    if bucket_us <= 0:
        raise ValueError(f"bucket must be positive, got {bucket!r}")
    bound = _filters(**filters)
    if all(v is None for v in bound.values()):
        # Unfiltered, the per-key input was kept with the derived tables.
        return _shape(query(store, "duplicates_over_time_all", bucket_us=bucket_us))
    return _shape(query(store, "duplicates_over_time", bucket_us=bucket_us, **bound))


def lock_overruns(store: Store, **filters: Any) -> pd.DataFrame:
    """Executions whose lock expired while they ran, in the alert row shape.

    Columns: rule ('lock_expired_while_running'), key, job_id, delivery_attempt, worker_id,
    job_type, lock_key, lock_owner, expired_at, execution_end, overrun_ms, overlapped_by
    (the other owner that acquired the lock in the gap, or null), lock_expired_event (when
    the owner was told, if it was).
    """
    frame = _shape(query(store, "lock_overruns", **_filters(**filters)))
    frame.insert(0, "rule", "lock_expired_while_running")
    return frame.rename(columns={"execution_uid": "execution_id"})


def split_brains(store: Store, **filters: Any) -> pd.DataFrame:
    """Pairs of owners holding unexpired locks on one lock_key at once, with the overlap."""
    frame = _shape(query(store, "split_brains", **_filters(**filters)))
    frame.insert(0, "rule", "split_brain")
    return frame


def stale_owner_writes(store: Store, **filters: Any) -> pd.DataFrame:
    """side_effect/commit/ack by an owner whose lock had expired (`lock_expired`) or been
    acquired by another owner (`taken_by`, `taken_at`) before the write (`ts`)."""
    return _shape(
        query(store, "stale_owner_writes", **_filters(**filters)), flags=("lock_expired",)
    )


def durations(store: Store, **filters: Any) -> pd.DataFrame:
    """Per job type: executions, p50/p95/p99/max duration (ms), the lock TTL and visibility
    timeout in force, headroom against each (setting - p99), and the share of executions
    that ran longer than their own lock TTL / visibility timeout."""
    frame = _shape(query(store, "durations", **_filters(**filters)))
    frame["lock_headroom_ms"] = frame["lock_ttl_ms"] - frame["p99_ms"]
    frame["visibility_headroom_ms"] = frame["visibility_timeout_ms"] - frame["p99_ms"]
    return frame


def duration_samples(store: Store, **filters: Any) -> pd.DataFrame:
    """One row per execution: job_type, key, duration_ms and the settings it ran under."""
    return _shape(query(store, "duration_samples", **_filters(**filters)))


def checklist(
    store: Store,
    *,
    skew_tolerance_ms: float = SKEW_TOLERANCE_MS,
    stampede_window: timedelta | str = timedelta(microseconds=STAMPEDE_WINDOW_US),
    stampede_min_executions: int = STAMPEDE_MIN_EXECUTIONS,
    **filters: Any,
) -> dict[str, pd.DataFrame]:
    """The duplicate-safety checklist, one frame per item."""
    bound = _filters(**filters)
    per_type = _shape(query(store, "checklist_job_types", **bound))
    window_us = int(pd.Timedelta(stampede_window).value // 1_000)
    return {
        "lock_contention": per_type[
            [
                "job_type",
                "executions",
                "lock_contended",
                "lock_contention_ratio",
                "lock_wait_ms_total",
                "lock_wait_ms_avg",
            ]
        ],
        "redeliveries": per_type[
            ["job_type", "messages", "executions", "redeliveries", "deliveries_per_message"]
        ],
        "idempotency": per_type[
            ["job_type", "idempotency_hits", "new_executions", "idempotency_hit_ratio"]
        ],
        "occ_conflicts": per_type[
            ["job_type", "executions", "occ_conflicts", "occ_conflict_ratio"]
        ],
        "outbox_lag": _shape(query(store, "checklist_outbox", **bound)),
        "crash_loops": _shape(
            query(
                store,
                "checklist_crash_loops",
                since_us=bound["since_us"],
                until_us=bound["until_us"],
            )
        ),
        "clock_skew": _shape(
            query(store, "checklist_clock_skew", tolerance_ms=float(skew_tolerance_ms), **bound),
            flags=("skewed",),
        ),
        "cache_stampedes": _shape(
            query(
                store,
                "checklist_stampedes",
                window_us=window_us,
                min_executions=int(stampede_min_executions),
                **bound,
            )
        ),
    }


def store_summary(store: Store) -> pd.DataFrame:
    """One row: how many events the store holds, the first and the last `ts`."""
    return query(store, "store_summary")


def filter_values(store: Store) -> pd.DataFrame:
    """The values the filters offer (field: job_type, queue, service), busiest first."""
    return query(store, "filter_values")


def _after_prefix(prefix: str) -> str:
    """The least string above every string that starts with `prefix` (code point order,
    which is UTF-8 byte order): its last character raised by one, skipping surrogates."""
    kept = prefix
    while kept:
        last = ord(kept[-1])
        if last < 0x10FFFF:
            raised = 0xE000 if 0xD800 <= last + 1 <= 0xDFFF else last + 1
            return kept[:-1] + chr(raised)
        kept = kept[:-1]
    # Nothing is above a prefix of U+10FFFF only (or the empty one) but longer strings of it.
    return chr(0x10FFFF) * (len(prefix) + 1024)


def key_suggestions(store: Store, prefix: str, limit: int = 20) -> pd.DataFrame:
    """Values (idempotency key, job_id, resource key, lock owner, lock key) that start with
    `prefix`: kind, value, the key whose timeline they open, events, last_ts; newest first."""
    return query(
        store, "key_suggestions", prefix=prefix, prefix_end=_after_prefix(prefix), limit=limit
    )


def lint(store: Store, **filters: Any) -> pd.DataFrame:
    """Unsafe settings named from what was observed: setting, job_type, finding, evidence,
    change (see queries/lint.py for the rules)."""
    bound = _filters(**filters)
    timing = durations(store, **filters)
    facts = _shape(query(store, "lint_facts", **bound))
    return lint_findings(timing, facts)
