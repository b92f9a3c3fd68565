"""Time the queries behind each dashboard page on an embedded store of N model events.

    python -m benchmarks.dashboard_pages --events 10000000 [--store DIR]

A page's time is the sum of its data loaders (what `dashboard/loaders.py` calls; the
sidebar's store summary and filter values count on every page), without Streamlit's answer
cache. Cold: a store opened afresh, its derived tables already persisted by an earlier
build (the build itself is timed on its own). Warm: the median of repeats on the same open
store. Then each whole page through Streamlit's AppTest: first run with every cache
cleared (the store opened, the persisted build attached), then reruns (answers cached),
with the loaders that ran, each of which should run once. Target: under 1.5 s per page at
10M events.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import alerts
import queries
from benchmarks.forensics_speed import load
from dashboard import charts
from derive.embedded import state as derived_state
from queries.derived import ensure
from store.embedded import EmbeddedStore

TARGET_S = 1.5
APP_FILE = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
WARM_REPEATS = 3
Loader = Callable[[EmbeddedStore], Any]


def sidebar(store: EmbeddedStore) -> None:
    store.snapshot_id()
    queries.store_summary(store)
    queries.filter_values(store)


def overview(store: EmbeddedStore) -> None:
    found = queries.duplicates(store)
    width = charts.bucket_for(found["last_ts"].max() - found["first_ts"].min())
    queries.duplicates_over_time(store, bucket=width)


def timeline_page(key: str) -> Loader:
    def page(store: EmbeddedStore) -> None:
        queries.key_suggestions(store, key[:12], limit=20)
        queries.duplicates(store)  # the worst keys, and the verdict's row
        queries.timeline(store, key)

    return page


def durations(store: EmbeddedStore) -> None:
    ranked = queries.durations(store)
    queries.duration_samples(store, job_type=ranked["job_type"].iloc[0])
    queries.lint(store)


def alerts_page(store: EmbeddedStore) -> None:
    queries.lock_overruns(store)
    queries.split_brains(store)
    queries.stale_owner_writes(store)
    alerts.history(store, limit=200)


def checklist(store: EmbeddedStore) -> None:
    queries.checklist(store)


def seconds(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--store", type=Path, default=None,
                        help="embedded store folder to reuse (built there if empty)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="dupescope-pages-", dir=args.workdir))
    try:
        measure(args.store or work / "embedded", args.events)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(folder: Path, n: int) -> None:
    print(f"dupescope dashboard pages: {n:,} events, embedded store at {folder}")
    store = EmbeddedStore(folder)
    if not store.segments():
        print(f"load: {load(store, n):.1f} s (write + compact)")
    kept = derived_state.load(store)
    if kept is None or kept.snapshot != store.snapshot_id():
        built = seconds(lambda: ensure(store))
        print(f"derived tables brought up to date (kept for the next process): {built:.1f} s")
    harmful = queries.duplicates(store).query("outcome == 'harmful'")
    key = str(harmful.sort_values("executions").iloc[-1]["key"])
    store.close()
    pages: dict[str, Loader] = {
        "overview": overview,
        "timeline": timeline_page(key),
        "durations": durations,
        "alerts": alerts_page,
        "checklist": checklist,
    }
    print(f"{'page':10} {'cold s':>8} {'warm s':>8}  (sidebar included; timeline key {key})")
    for name, page in pages.items():
        fresh = EmbeddedStore(folder)
        cold = seconds(lambda p=page, s=fresh: (sidebar(s), p(s)))
        warm = statistics.median(
            seconds(lambda p=page, s=fresh: (sidebar(s), p(s))) for _ in range(WARM_REPEATS)
        )
        fresh.close()
        ok = "ok" if max(cold, warm) < TARGET_S else ("warm ok" if warm < TARGET_S else "MISSED")
        print(f"{name:10} {cold:8.3f} {warm:8.3f}  [{ok}, target {TARGET_S} s]", flush=True)
    through_apptest(folder, key)


class _Loaders(logging.Handler):
    """Collects the loaders that answered (each logs once per real run, not on a cache hit)."""

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.ran.append(str(record.args[0]) if record.args else record.getMessage())


def through_apptest(folder: Path, key: str) -> None:
    """Each whole page: first in this process (imports, Plotly's lazy validators), again
    with every Streamlit cache cleared (the store reopened), then reruns (answers cached)."""
    os.environ["DUPESCOPE_STORE"] = str(folder)
    loaders = _Loaders()
    logger = logging.getLogger("dupescope.dashboard")
    logger.addHandler(loaders)
    logger.setLevel(logging.INFO)
    pages = (("overview", {}), ("timeline", {"key": key}), ("durations", {}), ("alerts", {}),
             ("checklist", {}))
    first_in_process = {name: _page_run(name, query)[0] for name, query in pages}
    print(f"{'page (AppTest)':15} {'process':>8} {'cleared':>8} {'rerun':>8}  "
          "loaders that ran with caches cleared")
    for name, query in pages:
        loaders.ran.clear()
        cleared, rerun, failed = _page_run(name, query)
        print(f"{name:15} {first_in_process[name]:8.3f} {cleared:8.3f} {rerun:8.3f}  "
              f"{', '.join(loaders.ran)}{' EXCEPTION' if failed else ''}", flush=True)
    logger.removeHandler(loaders)


def _page_run(name: str, query: dict[str, str]) -> tuple[float, float, bool]:
    """(first run with every Streamlit cache cleared, median rerun, whether it failed)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    app = AppTest.from_file(str(APP_FILE), default_timeout=300)
    for field, value in query.items():
        app.query_params[field] = value
    app.switch_page(f"app_pages/{name}.py")
    first = seconds(app.run)
    rerun = statistics.median(seconds(app.run) for _ in range(WARM_REPEATS))
    return first, rerun, bool(app.exception)


if __name__ == "__main__":
    main()
