"""Rows of the `duplicates` query shaped as the command line prints them (cause named,
job_ids sorted, times as UTC timestamps), by polars without pandas.

Apart from the module that runs the query (queries/duplicates_table.py), so that the
renderer the embedded deriver keeps the listing with (queries/derived.py) can shape rows
without importing the reader back.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

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

#: What became of a duplicate's effect: two or more runs ran it; the extras were absorbed
#: (some run reported its effect, or its skip); no run reported anything of it.
OUTCOMES: tuple[str, ...] = ("harmful", "absorbed", "unknown")

#: The columns of `duplicates`, in order.
DUPLICATE_COLUMNS = [
    "key",
    "job_type",
    "queue",
    "executions",
    "side_effects",
    "harmful",
    "outcome",
    "cause",
    "causes",
    "job_ids",
    "first_ts",
    "last_ts",
    "lock_expired_while_running",
    "overlapped",
    "split_brain",
]


def shaped(rows: pa.Table) -> pa.Table:
    """Rows of the `duplicates` query (or its kept answer) as `duplicates_arrow` gives
    them: the cause named, job_ids sorted, times as UTC timestamps."""
    import polars as pl

    answer = pl.from_arrow(rows)
    assert isinstance(answer, pl.DataFrame)
    flag = {name: pl.col(name).cast(pl.Boolean).fill_null(False)
            for name in (*CAUSES, "lock_expired_while_running", "overlapped", "split_brain")}
    mask = pl.sum_horizontal(flag[c].cast(pl.Int64) * (1 << bit) for bit, c in enumerate(CAUSES))
    frame = answer.select(
        pl.col("key"),
        pl.col("job_type").cast(pl.String),
        pl.col("queue").cast(pl.String),
        pl.col("executions").cast(pl.Int64),
        pl.col("side_effects").cast(pl.Int64),
        # Null where the outcome is unknown: neither harmful nor absorbed can be told.
        pl.col("harmful").cast(pl.Boolean),
        pl.col("outcome").cast(pl.String),
        pl.int_range(pl.len()).alias("_row"),
        mask.alias("_mask"),
        pl.col("job_ids").cast(pl.List(pl.String)),
        *(pl.from_epoch(pl.col(f"{end}_us").cast(pl.Int64), "us").dt.replace_time_zone("UTC")
          .alias(f"{end}_ts") for end in ("first", "last")),
        *(flag[name] for name in ("lock_expired_while_running", "overlapped", "split_brain")),
    )
    frame = sorted_job_ids(frame).join(
        _cause_patterns(), on="_mask", how="left", maintain_order="left")
    return frame.select(DUPLICATE_COLUMNS).to_arrow()


def named_causes(raw: dict[str, Any]) -> dict[str, Any]:
    """One row of the `duplicates` query (or its kept answer), as plain values, with the
    fields a key's verdict reads shaped as `shaped` shapes them: key, job_type, harmful
    (None where the outcome is unknown), outcome, cause and causes. For one key's row,
    where polars or pandas would cost more to import than the row costs to shape."""
    mask = sum(1 << bit for bit, cause in enumerate(CAUSES) if raw.get(cause))
    harmful = raw.get("harmful")
    return {
        "key": raw["key"],
        "job_type": raw.get("job_type"),
        "harmful": None if harmful is None else bool(harmful),
        "outcome": None if raw.get("outcome") is None else str(raw["outcome"]),
        "cause": FIRST_CAUSE[mask],
        "causes": list(CAUSE_LISTS[mask]),
    }


def sorted_job_ids(frame: Any) -> Any:
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
