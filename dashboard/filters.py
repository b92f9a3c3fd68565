"""The filters every page shares: time range, job type, queue, service, and live refresh.

They sit in the sidebar of the entry script, so they stay put while a person moves between
pages, and each is bound to a query parameter, so a copied URL reopens the same view.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import loaders
from dashboard.escape import md
from dashboard.source import derived, snapshot, store_url, unread_backlog
from queries.derived import BuildProgress
from store.otel_progress import ReadProgress

#: Windows end at the store's newest event, not at the wall clock: a store loaded from
#: yesterday's logs still answers "the last hour" with that hour's events.
WINDOWS: dict[str, timedelta | None] = {
    "all": None,
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "custom": None,
}
WINDOW_LABELS = {
    "all": "Everything",
    "15m": "Last 15 minutes",
    "1h": "Last hour",
    "6h": "Last 6 hours",
    "24h": "Last 24 hours",
    "7d": "Last 7 days",
    "custom": "Custom range",
}
#: The URL names a time range by its label ("?window=Last+hour"), as the selectbox binds it.
_WINDOW_OF_LABEL = {label: window for window, label in WINDOW_LABELS.items()}
REFRESH_SECONDS = 10


@dataclass(frozen=True)
class Filters:
    """What the pages narrow their questions by; None means "all"."""

    since: datetime | None = None
    until: datetime | None = None
    job_type: str | None = None
    queue: str | None = None
    service: str | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The filters that are set (unset ones left out, so "no filter" caches as one key)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        """In words, for a sentence; values from the URL, so draw it through escape.md."""
        parts = [f"{k}={v}" for k, v in asdict(self).items() if v is not None and k not in
                 ("since", "until")]
        if self.since or self.until:
            parts.insert(0, f"{_short(self.since)} – {_short(self.until)}")
        return ", ".join(parts) or "everything"


def _short(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "…"


def _to_datetime(value: Any) -> datetime | None:
    if value is None or pd.isna(value):
        return None
    return pd.Timestamp(value).tz_convert("UTC").to_pydatetime().replace(tzinfo=None)


def window_bounds(
    window: str, newest: datetime | None, custom: tuple[datetime, datetime] | None = None
) -> tuple[datetime | None, datetime | None]:
    """The (since, until) a time-range choice means, given the store's newest event."""
    if window == "custom" and custom:
        return custom
    span = WINDOWS.get(window)
    if span is None or newest is None:
        return None, None
    return newest - span, None


def window_span() -> timedelta | None:
    """How far back from the newest event the chosen time range reaches (None: everything,
    or a custom range); read before the sidebar draws its selectbox, from the URL then."""
    window = st.session_state.get("window") or st.query_params.get("window") or "all"
    return WINDOWS.get(_WINDOW_OF_LABEL.get(window, window))


def shown_snapshot(url: str) -> str:
    """The store's snapshot for the chosen time range, its derived tables brought up to
    it (every question reads them). Over the Collector's tables a window never read is
    read first, before the backlog (dashboard/source.py). A read of the Collector's tables
    and a build of the derived tables from nothing each take minutes on a large store:
    either shows its progress at the top of the page while it runs."""
    bar = st.empty()

    def show_read(progress: ReadProgress) -> None:
        share = progress.rows_read / progress.rows_total if progress.rows_total else 1.0
        bar.progress(min(share, 1.0), text=md(progress.describe()))

    def show_build(progress: BuildProgress) -> None:
        share = progress.steps_done / progress.steps_total if progress.steps_total else 1.0
        bar.progress(min(share, 1.0), text=md(progress.describe()))

    try:
        snap = snapshot(url, window_span(), show_read)
        derived(url, snap, show_build)
        return snap
    finally:
        bar.empty()


def _choice(label: str, key: str, values: list[str]) -> str | None:
    options: list[str | None] = [None, *values]
    current = st.session_state.get(key)
    if current is not None and current not in values:
        # A link from another store (or an old URL) names a value this store lacks.
        options.append(current)
    return st.selectbox(
        label,
        options,
        format_func=lambda v: "All" if v is None else v,
        key=key,
        bind="query-params",
    )


def sidebar() -> None:
    """Draw the shared filters in the sidebar (the entry script calls this once per run)."""
    url = store_url()
    try:
        snap = shown_snapshot(url)
        summary = loaders.store_summary(url, snap)
        values = loaders.filter_values(url, snap)
    except Exception as exc:  # a store that cannot be opened still gets a page
        st.sidebar.error(f"Cannot read the store {md(url)}: {md(exc, 500)}")
        return
    with st.sidebar:
        st.subheader("Filters")
        window = st.selectbox(
            "Time range",
            list(WINDOWS),
            format_func=WINDOW_LABELS.__getitem__,
            key="window",
            bind="query-params",
        )
        first, last = _to_datetime(summary.get("first_ts")), _to_datetime(summary.get("last_ts"))
        if window == "custom" and first and last and first < last:
            st.slider(
                "From – to (UTC)",
                min_value=first,
                max_value=last,
                value=(first, last),
                format="MM-DD HH:mm",
                key="custom_range",
                persist_state="session",
            )
        _choice("Job type", "job_type", values.get("job_type", []))
        _choice("Queue", "queue", values.get("queue", []))
        if values.get("service"):
            _choice("Service", "service", values["service"])
        st.toggle(
            f"Auto-refresh every {REFRESH_SECONDS} s",
            key="live",
            bind="query-params",
            help="For a store a collector is writing to: re-reads it as segments arrive.",
        )
        events = int(summary.get("events") or 0)
        st.caption(f"{events:,} events · {md(loaders.describe_store(url))}")
        backlog = unread_backlog(url)
        if backlog is not None:
            since, rows = backlog
            st.info(
                f"Read from {md(since)} on first. The {rows:,} rows of the Collector's tables "
                "before that are read when the time range is Everything or a page needs a "
                "key's whole history; until then a key is judged by its rows in the window.",
                icon=":material/hourglass_top:",
            )


def current() -> Filters:
    """The filters as the sidebar last set them."""
    state = st.session_state
    newest = None
    window = state.get("window") or "all"
    if WINDOWS.get(window) is not None:
        url = store_url()
        newest = _to_datetime(loaders.store_summary(url, shown_snapshot(url)).get("last_ts"))
    custom = state.get("custom_range") if window == "custom" else None
    since, until = window_bounds(window, newest, tuple(custom) if custom else None)
    return Filters(
        since=since,
        until=until,
        job_type=state.get("job_type"),
        queue=state.get("queue"),
        service=state.get("service"),
    )


def live() -> bool:
    return bool(st.session_state.get("live"))
