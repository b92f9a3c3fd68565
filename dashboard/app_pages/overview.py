"""Overview: how many keys ran more than once, which did harm, why, and where.

The landing page after "the customer was charged twice": the worst keys link to their
timelines, and every number follows the sidebar's filters.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, loaders, ui
from dashboard.escape import md
from dashboard.filters import Filters


def show_totals(found: pd.DataFrame) -> None:
    outcomes = found["outcome"].value_counts()
    extra = int(found["executions"].sum() - len(found))
    columns = st.columns(5)
    columns[0].metric("Duplicate keys", f"{len(found):,}")
    columns[1].metric("Harmful (effect ran twice)", f"{int(outcomes.get('harmful', 0)):,}")
    columns[2].metric("Absorbed", f"{int(outcomes.get('absorbed', 0)):,}")
    columns[3].metric(
        "Unknown outcome", f"{int(outcomes.get('unknown', 0)):,}",
        help="No run of the key reported its effect (side_effect, idempotency_hit, "
        "lock_contended, occ_conflict, commit): harmful or absorbed cannot be told.",
    )
    columns[4].metric("Extra executions", f"{extra:,}")


def show_over_time(url: str, snap: str, chosen: Filters, found: pd.DataFrame) -> None:
    span = found["last_ts"].max() - found["first_ts"].min()
    width = charts.bucket_for(span)
    over_time = ui.forensic(
        "duplicates over time",
        url,
        snap,
        "duplicates_over_time",
        {**chosen.as_kwargs(), "bucket": width},
    )
    if over_time is not None and not over_time.empty:
        ui.plot(
            "duplicates over time",
            lambda: charts.duplicates_over_time_figure(over_time),
            "over_time",
        )
        st.caption(
            f"One bar per {width}; a key counts where it first ran. The eight job types with "
            "most duplicates are named, the rest are “other”."
        )


def open_selected_key(worst: pd.DataFrame) -> None:
    picked = st.session_state.get("worst_keys", {}).get("selection", {}).get("rows", [])
    if picked:
        st.switch_page("app_pages/timeline.py", query_params={"key": worst.iloc[picked[0]]["key"]})


def show_worst_keys(found: pd.DataFrame) -> None:
    st.subheader("Worst keys")
    worst = charts.worst_keys(found).reset_index(drop=True)
    st.dataframe(
        worst.assign(timeline=[ui.timeline_link(k) for k in worst["key"]])[
            ["timeline", "job_type", "queue", "executions", "side_effects", "outcome", "cause",
             "causes", "job_ids", "first_ts", "last_ts"]
        ],
        hide_index=True,
        key="worst_keys",
        on_select="rerun",
        selection_mode="single-row",
        column_config={
            "timeline": st.column_config.LinkColumn(
                "key", display_text=r"key=(.*)$", help="Opens the key's timeline"
            ),
            "outcome": st.column_config.TextColumn(
                "outcome", help="harmful, absorbed, or unknown: no run reported its effect"),
        },
    )
    st.caption("Select a row (or click its key) to open the key's timeline.")
    open_selected_key(worst)


def show_causes_and_job_types(found: pd.DataFrame) -> None:
    left, right = st.columns([2, 3])
    with left:
        ui.plot("causes", lambda: charts.causes_figure(found), "causes")
    with right:
        st.subheader("Job types")
        st.dataframe(charts.job_type_table(found), hide_index=True, height=330)


def overview() -> None:
    opened = ui.page_answer("duplicates")
    if opened is None:
        return
    url, snap, chosen, found = opened
    ui.ignored(loaders.ignored_filters("duplicates", chosen.as_kwargs()))
    if found.empty:
        ui.nothing(f"No key ran more than once ({md(chosen.describe())}).")
        return
    show_totals(found)
    show_over_time(url, snap, chosen, found)
    show_causes_and_job_types(found)
    show_worst_keys(found)


st.title("Duplicate executions")
ui.refreshing(overview)
