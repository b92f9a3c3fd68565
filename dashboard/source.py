"""The store the dashboard reads: opened once per process, re-read whenever it changes.

A collector may be adding segments while the dashboard runs, so every loader takes the
store's current snapshot id as an argument: the cached answer is reused only while the
store holds the same data, and the snapshot itself is re-read every few seconds. It is
kept here rather than in Streamlit's cache: re-reading it may read the Collector's tables
for minutes, and the page shows that read's progress as it goes, which an element drawn
from inside a cached function cannot.

Over the Collector's tables a first read of a large table takes minutes, so a page that
shows the last hour asks for that hour's rows first (`snapshot(url, recent)`): the
store reads the window behind its newest row and leaves the backlog for a page that asks
about everything (store/otel.py `read_newest_first`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import streamlit as st

from queries.derived import BuildProgress, ensure, following_builds
from queries.loader import run
from store import DEFAULT_STORE, Store, open_store
from store.otel_progress import Listener

SNAPSHOT_TTL_SECONDS = 5
BuildListener = Callable[[BuildProgress], None]
T = TypeVar("T")


def store_url() -> str:
    """The store named by DUPESCOPE_STORE (set by `dupescope dashboard`), or the default."""
    return os.environ.get("DUPESCOPE_STORE") or DEFAULT_STORE


@st.cache_resource(show_spinner=False)
def _opened(url: str) -> tuple[Store, threading.Lock]:
    # One lock per store: a DuckDB connection and a chDB session each serve one query at a
    # time, and every browser tab runs its script in its own thread.
    return open_store(url), threading.Lock()


def with_store(url: str, work: Callable[[Store], T]) -> T:
    """Run `work` on the store at `url`, one query at a time."""
    store, lock = _opened(url)
    with lock:
        return work(store)


def _snapshot_of(store: Store, recent: timedelta | None, show: Listener | None) -> str:
    read_newest_first = getattr(store, "read_newest_first", None)
    if read_newest_first is not None:
        read_newest_first(recent)
    progress = getattr(store, "progress", None) if show is not None else None
    if progress is not None:
        progress.follow(show)
    try:
        snapshot_id = store.snapshot_id()
    finally:
        if progress is not None:
            progress.unfollow(show)
    if snapshot_id is not None:
        return snapshot_id
    summary = run(store, "store_summary")
    row = summary.iloc[0]
    return f"{row['events']}:{row['last_ts']}"


_kept: dict[tuple[str, timedelta | None], tuple[float, str]] = {}
_kept_lock = threading.Lock()


def snapshot(url: str, recent: timedelta | None = None, show: Listener | None = None) -> str:
    """Changes whenever the store's data changes; every loader's cache key includes it.
    Kept SNAPSHOT_TTL_SECONDS per (url, recent).

    `recent`: the page shows only the last `recent` before the newest event, so a store
    over the Collector's tables with a backlog of more than a chunk may read that window
    alone first (None: the page needs everything, the backlog is read). `show` is told
    the progress of a read of the Collector's tables, chunk by chunk."""
    key = (url, recent)
    with _kept_lock:
        kept = _kept.get(key)
    if kept is not None and time.monotonic() - kept[0] < SNAPSHOT_TTL_SECONDS:
        return kept[1]
    snapshot_id = with_store(url, lambda store: _snapshot_of(store, recent, show))
    with _kept_lock:
        _kept[key] = (time.monotonic(), snapshot_id)
    return snapshot_id


def forget_snapshots() -> None:
    """Re-read every snapshot on its next use (what the few-second ttl does on its own)."""
    with _kept_lock:
        _kept.clear()
        _derived.clear()


#: The snapshot each store's derived tables were last brought up to here.
_derived: dict[str, str] = {}


def derived(url: str, snapshot_id: str, show: BuildListener | None = None) -> None:
    """Bring the derived tables of the store at `url` up to `snapshot_id` before a page
    asks its questions, telling `show` each step of a build from nothing: on a large
    store that build takes minutes, and a loader (a cached function) cannot draw its
    progress. Once a snapshot: a loader brings the state up to date anyway."""
    with _kept_lock:
        if _derived.get(url) == snapshot_id:
            return

    def bring_up_to_date(store: Store) -> None:
        if show is None:
            ensure(store)
            return
        with following_builds(store, show):
            ensure(store)

    with_store(url, bring_up_to_date)
    with _kept_lock:
        _derived[url] = snapshot_id


def unread_backlog(url: str) -> tuple[str, int] | None:
    """Where the store's last read began and the rows of the backlog it left unread, when
    it read a recent window first; None when it holds everything."""
    def left(store: Store) -> tuple[str, int] | None:
        progress = getattr(store, "progress", None)
        last = getattr(progress, "last", None)
        if last is None or not last.recent_from:
            return None
        return last.recent_from, int(last.rows_total)

    return with_store(url, left)


def close(url: str) -> None:
    """Close and forget the store at `url` (chDB allows one open session per process)."""
    store, lock = _opened(url)
    with lock:
        store.close()
    _opened.clear()
    forget_snapshots()
