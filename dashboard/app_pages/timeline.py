"""Key timeline: what happened to one key, execution by execution, and why it ran twice.

Reached by search (idempotency key, job_id, resource key or lock owner, by prefix) or by
the deep link `/timeline?key=KEY` that alerts and the CLI print. Keys come from events and
from the URL, so every one is drawn through `escape.md`; one too long for a URL still
opens here (typed or picked), with a note that its address will not reopen it.
"""

from __future__ import annotations

import streamlit as st

from dashboard import charts, links, loaders, ui
from dashboard.escape import md, shorten
from dashboard.source import snapshot, store_url
from dashboard.swimlane import swimlane_figure
from queries.key_forensics import forensics_of
from queries.verdict import Verdict

#: A key or search text is cut to this many characters where a sentence or label shows it.
SHOWN_KEY_CHARS = 120
EVENT_COLUMNS = [
    "ts", "execution", "event", "job_id", "delivery_attempt", "worker_id", "lock_key",
    "lock_owner", "lock_ttl_ms", "visibility_timeout_ms", "resource_key", "attrs",
]


def open_suggestion() -> None:
    """A picked search match opens that match's key (the URL follows)."""
    picked = st.session_state.get("suggestion")
    if picked:
        st.session_state["key"] = picked


def show_suggestions(url: str, snap: str, prefix: str) -> None:
    matches = ui.answer("key search", lambda: loaders.key_suggestions(url, snap, prefix))
    if matches is None:
        return
    if matches.empty:
        ui.nothing(f"Nothing starts with **{md(prefix, SHOWN_KEY_CHARS)}** in the store.")
        return
    labels = {
        row.key: f"{shorten(row.value, SHOWN_KEY_CHARS)}  ·  {row.kind.replace('_', ' ')}  →  "
        f"{shorten(row.key, SHOWN_KEY_CHARS)}"
        for row in matches.itertuples()
    }
    st.selectbox(
        f"{len(labels)} match(es) for “{md(prefix, SHOWN_KEY_CHARS)}”",
        list(labels),
        index=None,
        format_func=labels.__getitem__,
        placeholder="Pick one to open its timeline",
        key="suggestion",
        on_change=open_suggestion,
    )


def show_worst_keys(url: str, snap: str) -> None:
    worst = loaders.forensic(url, snap, "duplicates", {})
    if worst is None or worst.empty:
        return
    worst = charts.worst_keys(worst, limit=10)
    st.caption("Or start from the worst duplicates:")
    st.dataframe(
        worst.assign(timeline=[ui.timeline_link(k) for k in worst["key"]])[
            ["timeline", "job_type", "executions", "outcome", "cause"]
        ],
        hide_index=True,
        column_config={
            "timeline": st.column_config.LinkColumn("key", display_text=r"key=(.*)$")
        },
    )


def show_verdict(said: Verdict) -> None:
    text = md(said.text)  # it quotes worker ids and error reasons from the events
    if said.harmful:
        st.error(text, icon=":material/warning:")
    elif said.outcome == "unknown":
        st.warning(text, icon=":material/help:")
    elif said.harmful is False:
        st.warning(text, icon=":material/shield:")
    else:
        st.success(text, icon=":material/check_circle:")
    if said.cause_line:
        st.caption(md(said.cause_line))


def note_long_key(key: str) -> None:
    """A key too long for a URL opens here, but the address bar cannot bring it back."""
    if not links.fits_in_url(key):
        ui.nothing(
            f"This key is {len(key):,} characters long: too long for a link, so this page's "
            "address will not reopen it. To come back, search for its first characters and "
            "pick it from the matches."
        )


def show_key(url: str, snap: str, key: str) -> bool:
    frame = ui.answer("timeline", lambda: loaders.timeline(url, snap, key))
    if frame is None or frame.empty:
        return False
    answer = ui.answer("duplicates", lambda: loaders.forensic(url, snap, "duplicates", {}))
    forensics = forensics_of(frame, answer, key)
    found = forensics.executions
    show_verdict(forensics.verdict)
    st.download_button(
        "Download report", lambda: loaders.key_report_html(url, snap, key),
        file_name="dupescope-report.html", mime="text/html", icon=":material/download:",
        help="One self-contained HTML file: verdict, chart, executions, locks, the settings "
        "that would have prevented it, related keys. No script; it asks no host.")
    ui.plot("timeline chart", lambda: swimlane_figure(frame, found), "swimlane")
    st.subheader("Executions")
    st.dataframe(found.assign(duration_ms=found["duration_ms"].round(0)), hide_index=True)
    st.subheader("Events")
    st.dataframe(frame[[c for c in EVENT_COLUMNS if c in frame]], hide_index=True)
    return True


st.title("Key timeline")
url = store_url()
snap = snapshot(url)
key = st.text_input(
    "Idempotency key, job_id, resource key or lock owner",
    key="key",
    bind="query-params",
    placeholder="inv-2025-0042, a job id, acct-17, worker-3:4711…",
    help="An exact key opens its timeline; anything else searches by prefix.",
).strip()

if not key:
    ui.nothing("Enter a key to see every execution of it, or open one from the Overview.")
    show_worst_keys(url, snap)
else:
    note_long_key(key)
    if not show_key(url, snap, key):
        show_suggestions(url, snap, key)
