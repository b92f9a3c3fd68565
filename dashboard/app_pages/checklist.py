"""Checklist: the signals that tell whether a job system is duplicate-safe, per job type.

Lock contention, redeliveries, idempotency hits against new executions, outbox lag,
optimistic-concurrency conflicts, crash loops by service version, clock skew per worker
and cache stampedes: each drawn where a glance says more than the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, ui
from derive.defaults import SKEW_TOLERANCE_MS


@dataclass(frozen=True)
class Item:
    """One checklist item: what it shows, why it matters, and when it is all clear."""

    name: str
    title: str
    why: str
    quiet_when_zero: str  # the column that, all zero, means nothing to see
    all_clear: str
    figure: Callable[[pd.DataFrame], go.Figure]


ITEMS = (
    Item(
        "redeliveries",
        "Redeliveries",
        "Every redelivery is a chance to run the job twice.",
        "redeliveries",
        "No message was delivered more than once.",
        lambda f: charts.ratio_figure(
            f.assign(redelivered=f["redeliveries"] / f["messages"]),
            "redelivered",
            "job_type",
            "Redelivered messages",
            "redeliveries / messages",
            ["messages", "redeliveries", "deliveries_per_message"],
            percent=True,
        ),
    ),
    Item(
        "idempotency",
        "Idempotency hits vs new executions",
        "Hits are duplicates the idempotency record absorbed; without it they would be harm.",
        "idempotency_hits",
        "No execution needed the idempotency record.",
        lambda f: charts.ratio_figure(
            f,
            "idempotency_hit_ratio",
            "job_type",
            "Absorbed by the idempotency record",
            "hits / executions",
            ["idempotency_hits", "new_executions"],
            percent=True,
        ),
    ),
    Item(
        "lock_contention",
        "Lock contention",
        "Contended locks mean concurrent executions of the same thing.",
        "lock_contended",
        "No execution found its lock held by another owner.",
        lambda f: charts.ratio_figure(
            f,
            "lock_contention_ratio",
            "job_type",
            "Found the lock taken",
            "contended / executions",
            ["lock_contended", "lock_wait_ms_avg"],
            percent=True,
        ),
    ),
    Item(
        "occ_conflicts",
        "Optimistic-concurrency conflicts",
        "A conflict is a concurrent writer caught by a version check: a near miss.",
        "occ_conflicts",
        "No optimistic-concurrency update missed.",
        lambda f: charts.ratio_figure(
            f,
            "occ_conflict_ratio",
            "job_type",
            "Version conflicts",
            "conflicts / executions",
            ["occ_conflicts"],
            percent=True,
        ),
    ),
    Item(
        "outbox_lag",
        "Outbox lag",
        "Rows written but not yet enqueued are effects a relay may publish twice or never.",
        "outbox_lag_ms_max",
        "No outbox rows, or every one was enqueued at once.",
        lambda f: charts.ratio_figure(
            f,
            "outbox_lag_ms_avg",
            "job_type",
            "Outbox write → enqueue lag",
            "average lag (ms)",
            ["outbox_lag_ms_max", "written_not_enqueued"],
        ),
    ),
    Item(
        "crash_loops",
        "Crash loops by service version",
        "A worker that dies mid-job leaves its delivery to be redelivered.",
        "unclean_restarts",
        "No worker restarted without a clean stop.",
        charts.crash_loop_figure,
    ),
    Item(
        "clock_skew",
        "Clock skew per worker",
        "A skewed clock makes timelines and lock expiry lie; timestamps across workers "
        "only compare within the skew.",
        "behind_ms",
        "No worker's clock runs behind the causal order of its events.",
        lambda f: charts.skew_figure(f, SKEW_TOLERANCE_MS),
    ),
    Item(
        "cache_stampedes",
        "Cache stampedes",
        "Many executions on one resource at once: the dogpile that locks are for.",
        "executions",
        "No burst of executions on one resource key.",
        charts.stampede_figure,
    ),
)


def quiet(item: Item, frame: pd.DataFrame) -> bool:
    if frame.empty:
        return True
    values = pd.to_numeric(frame.get(item.quiet_when_zero), errors="coerce")
    return values is not None and bool((values.fillna(0) == 0).all())


def show_item(item: Item, frame: pd.DataFrame | None) -> None:
    st.subheader(item.title)
    st.caption(item.why)
    if frame is None:
        ui.missing(f"checklist()['{item.name}']")
    elif quiet(item, frame):
        ui.all_clear(item.all_clear)
    else:
        ui.plot(item.title, lambda: item.figure(frame), f"checklist_{item.name}")
    if frame is not None and not frame.empty:
        with st.expander("Numbers"):
            st.dataframe(frame, hide_index=True)


def checklist_page() -> None:
    opened = ui.page_answer("checklist", skew_tolerance_ms=SKEW_TOLERANCE_MS)
    if opened is None:
        return
    *_, answers = opened
    for left, right in zip(ITEMS[::2], ITEMS[1::2], strict=True):
        columns = st.columns(2)
        for column, item in ((columns[0], left), (columns[1], right)):
            with column:
                show_item(item, answers.get(item.name))


st.title("Duplicate-safety checklist")
ui.refreshing(checklist_page)
