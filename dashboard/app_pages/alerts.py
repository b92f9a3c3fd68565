"""Alerts: locks that expired while their job still ran, who took them, and what fired.

Each row links to its key's timeline, where the gap between the lock's end and the
execution's end is drawn.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, loaders, ui
from dashboard.filters import Filters
from dashboard.source import store_url

KEY_LINK = st.column_config.LinkColumn("key", display_text=r"key=(.*)$")


def with_links(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The frame with its key as a timeline link, first, and the given columns after it."""
    linked = frame.assign(timeline=[ui.timeline_link(k) for k in frame["key"]])
    return linked[["timeline", *[c for c in columns if c in linked]]]


def show_overruns(url: str, snap: str, chosen: Filters) -> None:
    st.subheader("Locks that expired while running")
    found = ui.findings("lock overruns", url, snap, "lock_overruns", chosen.as_kwargs(),
                        "No lock expired while its execution was still running.")
    if found is None:
        return
    overlapped = found["overlapped_by"].notna()
    columns = st.columns(3)
    columns[0].metric("Executions that outlived their lock", f"{len(found):,}")
    columns[1].metric("Another owner took the lock", f"{int(overlapped.sum()):,}")
    columns[2].metric("Worst overrun", f"{found['overrun_ms'].max() / 1000:,.1f} s")
    ui.plot("overruns", lambda: charts.overruns_figure(found), "overruns")
    ordered = found.sort_values(["overrun_ms"], ascending=False)
    st.dataframe(
        with_links(ordered, ["job_type", "job_id", "delivery_attempt", "worker_id", "lock_key",
                             "lock_owner", "expired_at", "execution_end", "overrun_ms",
                             "overlapped_by"]),
        hide_index=True,
        column_config={"timeline": KEY_LINK},
    )


def show_other_lock_findings(url: str, snap: str, chosen: Filters) -> None:
    for name, title, columns in (
        ("split_brains", "Split brain: two owners held the lock at once",
         ["other_key", "lock_key", "lock_owner", "other_owner", "overlap_from", "overlap_ms"]),
        ("stale_owner_writes", "Writes by an owner that no longer held the lock",
         ["job_type", "event", "ts", "lock_key", "lock_owner", "expired_at", "taken_by"]),
    ):
        if loaders.forensic_function(name) is None:
            continue
        found = ui.forensic(name, url, snap, name, chosen.as_kwargs())
        if found is None or found.empty:
            continue
        st.subheader(title)
        st.dataframe(with_links(found, columns), hide_index=True,
                     column_config={"timeline": KEY_LINK})


def show_history(url: str) -> None:
    st.subheader("Alert history")
    if loaders.alert_history_function() is None:
        ui.nothing(
            "Alert history appears here once alerting runs on this store: "
            "`dupescope watch --webhook URL` evaluates the rules continuously and records "
            "every alert it fires."
        )
        return
    fired = ui.answer("alert history", lambda: loaders.alert_history(url))
    if fired is None:
        return
    if fired.empty:
        ui.nothing("No alert has fired on this store yet (`dupescope watch` records them).")
        return
    st.dataframe(
        with_links(fired, [c for c in fired.columns if c != "key"]),
        hide_index=True,
        column_config={"timeline": KEY_LINK},
    )


def alerts_page() -> None:
    opened = ui.store_page("lock_overruns")
    if opened is not None:
        show_overruns(*opened)
        show_other_lock_findings(*opened)
    show_history(store_url())


st.title("Alerts")
ui.refreshing(alerts_page)
