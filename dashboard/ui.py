"""Small page helpers: helpful empty states, guarded answers, links, live refresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from dashboard import links, loaders
from dashboard.escape import md
from dashboard.filters import REFRESH_SECONDS, Filters, current, live, shown_snapshot
from dashboard.source import store_url

T = TypeVar("T")

EMPTY_STORE = (
    "The store at **{where}** holds no events yet. Load the sample workload with "
    "`dupescope demo`, load logs with `dupescope ingest FILE`, or point your workers' "
    "OpenTelemetry exporter at `dupescope collect`."
)


def timeline_link(key: str) -> str:
    """The deep link of a key's timeline, relative so it works under any base path (a key
    too long for a URL links to a search by its first characters)."""
    return links.timeline_link(key)


def answer(label: str, work: Callable[[], T]) -> T | None:
    """Run a question; on failure say so in the page instead of showing a traceback."""
    try:
        return work()
    except Exception as exc:
        st.warning(f"Could not answer **{md(label)}**: {md(exc, 500)}", icon=":material/error:")
        return None


def plot(label: str, build: Callable[[], Any], key: str) -> None:
    """Draw a Plotly figure; a figure that cannot be drawn becomes a note, not a traceback."""
    figure = answer(label, build)
    if figure is not None:
        st.plotly_chart(figure, key=key)


def missing(question: str) -> None:
    """Say that this build's query library lacks a question a page needs."""
    st.info(
        f"This page needs `queries.{question}`, which this build of the query library "
        "does not provide yet.",
        icon=":material/construction:",
    )


def nothing(message: str) -> None:
    st.info(message, icon=":material/info:")


def all_clear(message: str) -> None:
    """Say that a question found nothing wrong (a good outcome, not an empty state)."""
    st.success(message, icon=":material/check:")


def refreshing(body: Callable[[], Any]) -> None:
    """Run the page body, re-running it on a timer while auto-refresh is on."""
    if live():
        st.fragment(run_every=REFRESH_SECONDS)(body)()
    else:
        body()


def ignored(filters: list[str]) -> None:
    if filters:
        st.caption(f"Not narrowed by {', '.join(filters)}: this question does not take it.")


def store_page(question: str) -> tuple[str, str, Filters] | None:
    """The store's url, its snapshot and the sidebar's filters, for a page built on the
    forensic `question`; None, said in the page, when the store holds no events yet or
    this build's query library lacks the question."""
    url, chosen = store_url(), current()
    snap = shown_snapshot(url)
    if not loaders.store_summary(url, snap).get("events"):
        nothing(EMPTY_STORE.format(where=md(loaders.describe_store(url))))
        return None
    if loaders.forensic_function(question) is None:
        missing(question)
        return None
    return url, snap, chosen


def page_answer(question: str, **extra: Any) -> tuple[str, str, Filters, Any] | None:
    """`store_page`, and the answer to the page's question under the filters (and `extra`
    settings); None where either is missing, said in the page."""
    opened = store_page(question)
    if opened is None:
        return None
    url, snap, chosen = opened
    found = forensic(question, url, snap, question, {**chosen.as_kwargs(), **extra})
    return None if found is None else (url, snap, chosen, found)


def findings(
    label: str, url: str, snap: str, name: str, filters: dict[str, Any], clear: str
) -> Any:
    """The forensic answer `name` when it found something; None once the page says it
    could not answer, or says `clear` for an answer with no rows."""
    found = forensic(label, url, snap, name, filters)
    if found is not None and found.empty:
        all_clear(clear)
        return None
    return found


def forensic(label: str, url: str, snap: str, name: str, filters: dict[str, Any]) -> Any:
    """The forensic answer `name` under the filters, or None with a note in the page."""
    return answer(label, lambda: loaders.forensic(url, snap, name, filters))
