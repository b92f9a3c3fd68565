"""The store the dashboard reads: opened once per process, re-read whenever it changes.

A collector may be adding segments while the dashboard runs, so every loader takes the
store's current snapshot id as an argument: the cached answer is reused only while the
store holds the same data, and the snapshot itself is re-read every few seconds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from queries.loader import run
from store import DEFAULT_STORE, Store, open_store

SNAPSHOT_TTL_SECONDS = 5
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


def _snapshot_of(store: Store) -> str:
    snapshot_id = store.snapshot_id()
    if snapshot_id is not None:
        return snapshot_id
    summary = run(store, "store_summary")
    row = summary.iloc[0]
    return f"{row['events']}:{row['last_ts']}"


@st.cache_data(ttl=SNAPSHOT_TTL_SECONDS, show_spinner=False)
def snapshot(url: str) -> str:
    """Changes whenever the store's data changes; every loader's cache key includes it."""
    return with_store(url, _snapshot_of)


def close(url: str) -> None:
    """Close and forget the store at `url` (chDB allows one open session per process)."""
    store, lock = _opened(url)
    with lock:
        store.close()
    _opened.clear()
    snapshot.clear()

