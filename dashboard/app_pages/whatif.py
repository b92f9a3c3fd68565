"""What if: the duplicates the observed runs would have had under other settings.

A visibility timeout, a lock TTL or a heartbeat is proposed; the page replays the
duplicated keys' runs (queries/whatif.py) and shows, per job type, duplicates and harmful
ones before and after, the keys that change (each opening its timeline), the delay the
settings add to crashed runs' recovery, and what the replay cannot know.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, links, loaders, ui
from dashboard.escape import md
from dashboard.filters import Filters

#: The keys that change are linked one by one (beside the table) up to this many.
LINKED_KEYS = 20
SUMMARY_COLUMNS = [
    "job_type", "duplicates_before", "duplicates_after", "harmful_before", "harmful_after",
    "unknown_harm_before", "unknown_harm_after", "runs_avoided", "effects_absorbed",
    "still_overrunning", "new_overruns", "recoveries", "retries_dropped", "added_delay_p50_ms",
    "added_delay_p95_ms", "added_delay_max_ms",
]


def proposed() -> tuple[int | None, int | None, int | None]:
    """The settings typed in, in ms (0 s: as observed)."""
    left, middle, right = st.columns(3)
    values = []
    for column, label, key in ((left, "Visibility timeout (s)", "visibility_timeout"),
                               (middle, "Lock TTL (s)", "lock_ttl"),
                               (right, "Heartbeat every (s)", "heartbeat")):
        with column:
            seconds = st.number_input(label, min_value=0.0, value=0.0, step=5.0, key=key,
                                      bind="query-params", help="0: as observed")
        values.append(round(seconds * 1000) if seconds else None)
    return values[0], values[1], values[2]


def show_keys(answer, job_type: str | None) -> None:  # type: ignore[no-untyped-def]
    keys = answer.keys
    if job_type:
        keys = keys[keys["job_type"] == job_type]
    st.subheader(f"Keys that change ({len(keys):,})")
    if keys.empty:
        ui.nothing("No key changes under these settings.")
        return
    st.dataframe(
        keys.assign(timeline=[ui.timeline_link(k) for k in keys["key"]])[
            ["timeline", "job_type", "cause", "change", "executions_before", "executions_after",
             "harmful_before", "harmful_after"]],
        hide_index=True,
        column_config={"timeline": st.column_config.LinkColumn("key",
                                                               display_text=r"key=(.*)$")},
    )
    st.caption("Open a timeline:")
    for key in keys["key"].head(LINKED_KEYS):
        st.page_link("app_pages/timeline.py", label=md(key, 120), icon=":material/timeline:",
                     query_params={"key": key if links.fits_in_url(key)
                                   else links.link_prefix(key)})


def whatif(url: str, snap: str, chosen: Filters) -> None:
    settings = proposed()
    if not any(settings):
        ui.nothing("Type a visibility timeout, a lock TTL or a heartbeat to replay the "
                   "observed runs under it.")
        return
    if settings[2] is not None and any(v is not None and v <= settings[2]
                                       for v in settings[:2]):
        ui.nothing("A heartbeat must beat more often than the limits it keeps alive.")
        return
    answer = ui.answer("what if", lambda: loaders.whatif(url, snap, settings,
                                                         chosen.as_kwargs()))
    if answer is None:
        return
    summary: pd.DataFrame = answer.summary
    if summary.empty:
        ui.nothing(f"No duplicates in the runs selected ({md(chosen.describe())}).")
        return
    job_types = ["every job type", *summary["job_type"].tolist()]
    picked = st.selectbox("Job type", job_types, key="whatif_job_type")
    job_type = None if picked == "every job type" else picked
    shown = summary if job_type is None else summary[summary["job_type"] == job_type]
    before, after = int(shown["duplicates_before"].sum()), int(shown["duplicates_after"].sum())
    harm_before, harm_after = int(shown["harmful_before"].sum()), int(shown["harmful_after"].sum())
    a, b, c = st.columns(3)
    a.metric("duplicate keys", f"{after:,}", f"{after - before:+,}", delta_color="inverse")
    b.metric("harmful", f"{harm_after:,}", f"{harm_after - harm_before:+,}",
             delta_color="inverse")
    c.metric("crashed runs' recovery, p95 added", _seconds(shown["added_delay_p95_ms"].max()))
    ui.plot("before and after", lambda: charts.whatif_figure(shown), "whatif")
    st.dataframe(shown[SUMMARY_COLUMNS], hide_index=True)
    show_keys(answer, job_type)
    st.subheader("What the replay cannot know")
    for line in answer.cannot_know:
        st.markdown(f"- {md(line)}")


def _seconds(ms: object) -> str:
    if ms is None or pd.isna(ms):  # type: ignore[call-overload]
        return "none"
    return f"{float(ms) / 1000:+.1f} s"  # type: ignore[arg-type]


def page() -> None:
    opened = ui.store_page("duplicates")
    if opened is None:
        return
    whatif(*opened)


st.title("What if")
page()
