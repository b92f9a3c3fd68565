"""The dashboard in a real headless Chromium over the shipped sample workload."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
        yield base


def _harmful_key() -> str:
    truth = json.loads(TRUTH.read_text())
    return next(d["key"] for d in truth["duplicates"]
                if d["harmful"] and d["cause"] == "worker_crash")


def test_a_deep_link_shows_the_verdict_and_the_chart(served) -> None:
    from dashboard.screenshots import browser_page, settle

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

    with browser_page() as page:
        page.goto(f"{served}/overview")
        settle(page, ".js-plotly-plot")
        assert "Page not found" not in page.content()
        assert page.get_by_text("Duplicate executions").count() >= 1
        page.goto(served)
        page.wait_for_url("**/overview", timeout=30_000)
