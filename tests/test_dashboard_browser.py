"""The dashboard in a real headless Chromium over the shipped sample workload."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
TRUTH = ROOT / "sample_data" / "sample.truth.json"


def _skip_reason() -> str | None:
    from dashboard.screenshots import CHROMIUM, SAMPLE

    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (install Debian's chromium: make browser)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not SAMPLE.exists():
        return f"the shipped sample {SAMPLE} is missing"
    return None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from dashboard.screenshots import load_sample, serving

    store = tmp_path_factory.mktemp("browser") / "store"
    load_sample(store)
    with serving(str(store)) as base:
        yield base, str(store)


def _harmful_key() -> str:
    truth = json.loads(TRUTH.read_text())
    return next(d["key"] for d in truth["duplicates"]
                if d["harmful"] and d["cause"] == "worker_crash")


def test_a_deep_link_shows_the_verdict_and_the_chart(served) -> None:
    from dashboard.screenshots import browser_page, settle

    served, _ = served
    key = _harmful_key()
    with browser_page() as page:
        page.goto(f"{served}/timeline?key={key}")
        settle(page, ".js-plotly-plot")
        alert = page.locator('[data-testid="stAlert"]').first
        assert "harmful" in alert.inner_text()
        assert "Delivered twice because" in alert.inner_text()
        assert page.locator(".js-plotly-plot").count() == 1
        assert key in page.url


def test_overview_is_a_stable_path(served) -> None:
    from dashboard.screenshots import browser_page, settle

    served, _ = served
    with browser_page() as page:
        page.goto(f"{served}/overview")
        settle(page, ".js-plotly-plot")
        assert "Page not found" not in page.content()
        assert page.get_by_text("Duplicate executions").count() >= 1
        page.goto(served)
        page.wait_for_url("**/overview", timeout=30_000)


#: Schemes of requests that stay in the browser.
LOCAL_SCHEMES = {"data", "blob", "about"}


def _outside(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme not in LOCAL_SCHEMES and parts.hostname != "127.0.0.1"


def test_no_page_requests_anything_beyond_127_0_0_1(served) -> None:
    """A forensics tool inside a production network works offline and tells no third
    party that a page was opened: every request of every page is recorded, and one to
    another host is stopped before it leaves."""
    from dashboard.screenshots import PAGES, browser_page, settle, worst_key

    base, store = served
    requested: list[str] = []
    stopped: list[str] = []
    with browser_page() as page:
        page.on("request", lambda request: requested.append(request.url))

        def stop(route) -> None:
            stopped.append(route.request.url)
            route.abort()

        page.route(_outside, stop)
        for name, ready in PAGES.items():
            path = f"{name}?key={worst_key(store)}" if name == "timeline" else name
            page.goto(f"{base}/{path}")
            settle(page, ready)
    assert len(requested) > len(PAGES)  # the pages did load their assets
    outside = sorted({url for url in requested if _outside(url)} | set(stopped))
    assert outside == [], f"requests beyond 127.0.0.1: {outside}"
