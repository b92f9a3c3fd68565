"""`duplicates` as one Arrow table, shaped by polars without pandas: what the command line
prints every duplicate from.

A frame of Python lists for the 600k keys of a store of 100M events took seconds to make
and more to print, and importing pandas alone cost a fresh process a few tenths of a
second; this module and what it imports load neither.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from queries.derived import query_arrow
from store.base import Store

if TYPE_CHECKING:
    import pandas as pd

#: A filter time as a user may give it (naive: UTC); spelled as text, so that naming it
#: loads no pandas.
Time: TypeAlias = "datetime | pd.Timestamp | str | None"

#: The contract's duplicate causes, in priority order: the first that applies is `cause`.
CAUSES: tuple[str, ...] = (
    "producer_retry",
    "visibility_timeout",
    "worker_crash",
    "broker_redelivery",
    "retry_after_failure",
)

#: For each bit mask of CAUSES (bit i set when CAUSES[i] applies), the causes in order.
CAUSE_LISTS: tuple[tuple[str, ...], ...] = tuple(
    tuple(c for bit, c in enumerate(CAUSES) if mask >> bit & 1) for mask in range(1 << len(CAUSES))
)
#: For each bit mask, the cause a duplicate is named by: the first, else `unknown`.
FIRST_CAUSE: tuple[str, ...] = tuple(c[0] if c else "unknown" for c in CAUSE_LISTS)

#: The columns of `duplicates`, in order.
DUPLICATE_COLUMNS = [
    "key",
    "job_type",
    "queue",
    "executions",
    "side_effects",
    "harmful",
    "cause",
    "causes",
    "job_ids",
    "first_ts",
    "last_ts",
    "lock_expired_while_running",
    "overlapped",
    "split_brain",
]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: Time) -> int | None:
    """Microseconds since the epoch of a filter time (naive: UTC)."""
    if value is None:
        return None
    if type(value) is datetime:  # what the command's --since and --until give: no pandas
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (aware - _EPOCH) // timedelta(microseconds=1)
    import pandas as pd  # parses every spelling a user may give; only when one is given

    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1_000)


def filters(
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> dict[str, Any]:
    """The execution filters as the queries bind them."""
    return {
        "job_type": job_type,
        "queue": queue,
        "since_us": micros(since),
        "until_us": micros(until),
    }


def duplicates_arrow(
    store: Store,
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> pa.Table:
    """`queries.duplicates` as an Arrow table of the same columns and values (times as
    UTC timestamps, lists as list columns), shaped by polars for all keys at once."""
    return shaped(query_arrow(store, "duplicates", **filters(job_type, queue, since, until)))


def shaped(rows: pa.Table) -> pa.Table:
    """Rows of the `duplicates` query (or its kept answer) as `duplicates_arrow` gives
    them: the cause named, job_ids sorted, times as UTC timestamps."""
    import polars as pl

    answer = pl.from_arrow(rows)
    assert isinstance(answer, pl.DataFrame)
    flag = {name: pl.col(name).cast(pl.Boolean).fill_null(False)
            for name in (*CAUSES, "harmful", "lock_expired_while_running", "overlapped",
                         "split_brain")}
    mask = pl.sum_horizontal(flag[c].cast(pl.Int64) * (1 << bit) for bit, c in enumerate(CAUSES))
    frame = answer.select(
        pl.col("key"),
        pl.col("job_type").cast(pl.String),
        pl.col("queue").cast(pl.String),
        pl.col("executions").cast(pl.Int64),
        pl.col("side_effects").cast(pl.Int64),
        flag["harmful"],
        pl.int_range(pl.len()).alias("_row"),
        mask.alias("_mask"),
        pl.col("job_ids").cast(pl.List(pl.String)),
        *(pl.from_epoch(pl.col(f"{end}_us").cast(pl.Int64), "us").dt.replace_time_zone("UTC")
          .alias(f"{end}_ts") for end in ("first", "last")),
        *(flag[name] for name in ("lock_expired_while_running", "overlapped", "split_brain")),
    )
    frame = _sorted_job_ids(frame).join(
        _cause_patterns(), on="_mask", how="left", maintain_order="left")
    return frame.select(DUPLICATE_COLUMNS).to_arrow()


def _sorted_job_ids(frame: Any) -> Any:
    """`job_ids` of a polars frame without nulls and sorted (a null list: []), sorting
    only the lists that need it: most keys ran under one job_id."""
    import polars as pl

    ids = pl.col("job_ids")
    frame = frame.with_columns(ids.fill_null(pl.lit([], pl.List(pl.String))))
    unsorted = frame.filter(
        (ids.list.len() > 1) | ids.list.eval(pl.element().is_null().any()).list.first())
    if unsorted.height == 0:
        return frame
    fixed = unsorted.select("_row", ids.list.drop_nulls().list.sort())
    return frame.update(fixed, on="_row")


def _cause_patterns() -> Any:
    """A polars frame of each bit mask of CAUSES (`_mask`) with its cause and causes."""
    import polars as pl

    return pl.DataFrame(
        {"_mask": range(len(CAUSE_LISTS)), "cause": list(FIRST_CAUSE),
         "causes": [list(c) for c in CAUSE_LISTS]},
        schema={"_mask": pl.Int64, "cause": pl.String, "causes": pl.List(pl.String)},
    )
