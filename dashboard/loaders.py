"""Cached answers for the pages: each keyed by the store, its snapshot and the filters.

Answers are kept for ten minutes at most but a new snapshot (the collector wrote a
segment) makes a new key at once, so a live store is never shown stale for longer than
the snapshot's few seconds. Forensic questions come from `queries`; a build without one
of them gets `None` back and the page says what is missing instead of failing.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

import queries
from dashboard.source import with_store
from store import Store

ANSWER_TTL_SECONDS = 600
log = logging.getLogger("dupescope.dashboard")


def forensic_function(name: str) -> Callable[..., Any] | None:
    """The query library's function for a question, or None where this build lacks it."""
    function = getattr(queries, name, None)
    return function if callable(function) else None


def _accepted(function: Callable[..., Any]) -> tuple[set[str], bool]:
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return set(parameters), takes_any


def ignored_filters(name: str, filters: dict[str, Any]) -> list[str]:
    """Filters that are set but that the question `name` cannot apply."""
    function = forensic_function(name)
    if function is None:
        return []
    accepted, takes_any = _accepted(function)
    return [k for k, v in filters.items() if v is not None and not takes_any and k not in accepted]


def _timed(label: str, work: Callable[[Store], Any]) -> Callable[[Store], Any]:
    def timed(store: Store) -> Any:
        started = time.perf_counter()
        try:
            return work(store)
        finally:
            log.info("%s answered in %.0f ms", label, (time.perf_counter() - started) * 1000)

    return timed


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def store_summary(url: str, snapshot: str) -> dict[str, Any]:
    frame = with_store(url, _timed("store_summary", queries.store_summary))
    return frame.iloc[0].to_dict() if not frame.empty else {"events": 0}


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def filter_values(url: str, snapshot: str) -> dict[str, list[str]]:
    frame = with_store(url, _timed("filter_values", queries.filter_values))
    return {field: group["value"].tolist() for field, group in frame.groupby("field")}


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def key_suggestions(url: str, snapshot: str, prefix: str, limit: int = 20) -> pd.DataFrame:
    return with_store(
        url,
        _timed("key_suggestions", lambda s: queries.key_suggestions(s, prefix, limit)),
    )


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def timeline(url: str, snapshot: str, key: str) -> pd.DataFrame:
    return with_store(url, _timed("timeline", lambda s: queries.timeline(s, key)))


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def forensic(url: str, snapshot: str, name: str, filters: dict[str, Any]) -> Any:
    """The answer of `queries.<name>` under the filters it understands; None if absent."""
    function = forensic_function(name)
    if function is None:
        return None
    accepted, takes_any = _accepted(function)
    given = {k: v for k, v in filters.items() if v is not None and (takes_any or k in accepted)}
    return with_store(url, _timed(name, lambda s: function(s, **given)))


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def whatif(url: str, snap: str, settings: tuple[int | None, int | None, int | None],
           filters: dict[str, Any]) -> Any:
    """`queries.whatif` under (visibility timeout, lock TTL, heartbeat) in ms."""
    from queries.whatif import Settings
    from queries.whatif import whatif as replay

    proposed = Settings(*settings)
    given = {k: v for k, v in filters.items() if v is not None}
    return with_store(url, _timed("whatif", lambda s: replay(s, proposed, **given)))


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def key_report_html(url: str, snap: str, key: str) -> str:
    """The incident report of `key` as one HTML file (dashboard/report.py)."""
    from dashboard.report import key_document, render

    found = with_store(url, _timed("key_report", lambda s: key_document(s, key)))
    return render(found, "html")


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def incident_report_html(url: str, snap: str, alert_id: str) -> str | None:
    """The report of an alert and the keys it names as one HTML file; None: no alert."""
    from dashboard.report import incident_document, render

    found = with_store(url, _timed("incident_report",
                                   lambda s: incident_document(s, alert_id)))
    return None if found is None else render(found, "html")


def clear() -> None:
    for loader in (store_summary, filter_values, key_suggestions, timeline, forensic, whatif,
                   key_report_html, incident_report_html):
        loader.clear()


@st.cache_data(ttl=ANSWER_TTL_SECONDS, show_spinner=False)
def describe_store(url: str) -> str:
    return with_store(url, lambda s: s.describe())


def alert_history_function() -> Callable[..., Any] | None:
    """The alerting module's history reader, where this build has one."""
    import alerts

    for name in ("alert_history", "history"):
        function = getattr(alerts, name, None)
        if callable(function):
            return function
    return None


@st.cache_data(ttl=10, show_spinner=False)
def alert_history(url: str, limit: int = 200) -> pd.DataFrame | None:
    """Alerts fired on the store (their state changes apart from events: a short ttl)."""
    function = alert_history_function()
    if function is None:
        return None
    return with_store(url, _timed("alert_history", lambda s: function(s, limit=limit)))
