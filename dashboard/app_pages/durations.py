"""Durations: how long each job type runs against the lock TTL and visibility timeout.

A job that outlives its lock or its visibility timeout is a duplicate waiting to happen;
the job types with the least headroom come first, then the settings to change.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, ui
from dashboard.escape import md
from dashboard.filters import Filters

SUMMARY_COLUMNS = [
    "job_type", "executions", "p50_ms", "p95_ms", "p99_ms", "max_ms", "lock_ttl_ms",
    "visibility_timeout_ms", "lock_headroom_ms", "visibility_headroom_ms",
    "share_over_lock_ttl", "share_over_visibility",
]


def ranked_by_headroom(timing: pd.DataFrame) -> pd.DataFrame:
    """Job types with the least p99 headroom (against either setting) first."""
    least = timing[["lock_headroom_ms", "visibility_headroom_ms"]].min(axis=1)
    return timing.assign(least_headroom_ms=least).sort_values(
        "least_headroom_ms", na_position="last"
    )


def whole_ms(frame: pd.DataFrame) -> pd.DataFrame:
    """Milliseconds as whole numbers: a fraction of a millisecond says nothing here."""
    return frame.assign(**{c: frame[c].round(0) for c in frame if c.endswith("_ms")})


def show_distribution(url: str, snap: str, chosen: Filters, ranked: pd.DataFrame) -> None:
    job_type = st.selectbox("Job type", ranked["job_type"].tolist(), key="duration_job_type")
    narrowed = {**chosen.as_kwargs(), "job_type": job_type}
    samples = ui.forensic("duration samples", url, snap, "duration_samples", narrowed)
    if samples is None or samples.empty:
        ui.nothing(f"No finished executions of {md(job_type)} to draw.")
        return
    row = ranked[ranked["job_type"] == job_type].iloc[0]
    ui.plot("duration histogram", lambda: charts.duration_figure(samples, row), "histogram")


def show_lint(url: str, snap: str, chosen: Filters) -> None:
    st.subheader("Settings to change")
    findings = ui.findings("settings lint", url, snap, "lint", chosen.as_kwargs(),
                           "No unsafe setting found in what was observed.")
    if findings is None:
        return
    st.dataframe(findings, hide_index=True)


def durations() -> None:
    opened = ui.page_answer("durations")
    if opened is None:
        return
    url, snap, chosen, timing = opened
    if timing.empty:
        ui.nothing(f"No executions to time ({md(chosen.describe())}).")
        return
    ranked = ranked_by_headroom(timing)
    left, right = st.columns([2, 3])
    with left:
        ui.plot("headroom", lambda: charts.headroom_figure(ranked), "headroom")
    with right:
        show_distribution(url, snap, chosen, ranked)
    st.subheader("Per job type, least headroom first")
    st.dataframe(
        whole_ms(ranked[[c for c in SUMMARY_COLUMNS if c in ranked]]),
        hide_index=True,
        column_config={
            "share_over_lock_ttl": st.column_config.ProgressColumn(
                "over lock TTL", format="percent", min_value=0.0, max_value=1.0
            ),
            "share_over_visibility": st.column_config.ProgressColumn(
                "over visibility timeout", format="percent", min_value=0.0, max_value=1.0
            ),
        },
    )
    show_lint(url, snap, chosen)


st.title("Durations")
ui.refreshing(durations)
