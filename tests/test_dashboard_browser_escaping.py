"""In a real Chromium: hostile values in events and in the URL show as text; none becomes an
image the browser fetches or a link it follows."""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest
from dashboard_cases import HOSTILE_HOST, HOSTILE_KEY, HOSTILE_WORKER, hostile_events

pytestmark = pytest.mark.browser

#: Elements the page drew that point at the hostile host, by any attribute that fetches or
#: navigates (HTML and SVG: Plotly draws its labels as SVG, with <a xlink:href>).
POINTING = """(host) => [...document.querySelectorAll('a, img, image, iframe, source, link')]
  .map(e => ['href', 'src', 'xlink:href', 'srcset']
    .map(a => e.getAttribute(a) || '').join(' '))
  .filter(t => t.includes(host))"""
HOST = HOSTILE_HOST.removeprefix("http://").split("/")[0] + "/"  # "127.0.0.1:9/"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from dashboard.screenshots import CHROMIUM, serving

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)")
    pytest.importorskip("playwright.sync_api")
    from conftest import events_to_table

    from store.embedded import EmbeddedStore

    folder = tmp_path_factory.mktemp("hostile") / "store"
    EmbeddedStore(folder).write(events_to_table(hostile_events()))
    with serving(str(folder)) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from dashboard.screenshots import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _visit(browser, url: str, ready: str, hover: bool = False) -> tuple[list[str], list[str], str]:  # type: ignore[no-untyped-def]
    """Open `url`; the requests that went to the hostile host, the elements pointing at it,
    and the page's text."""
    from dashboard.screenshots import settle

    page = browser.new_page(viewport={"width": 1440, "height": 1300})
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url) if HOST in r.url else None)
    page.route(f"{HOSTILE_HOST}/**", lambda route: route.abort())
    try:
        page.goto(url)
        settle(page, ready)
        if hover:  # Plotly draws hover labels, with their HTML, only under the pointer
            points = page.locator(".js-plotly-plot .scatterlayer .point")
            for index in range(min(points.count(), 8)):
                points.nth(index).hover(force=True)
                page.wait_for_timeout(100)
        pointing = page.evaluate(POINTING, HOST)
        return requested, pointing, page.inner_text("body").replace("\u2060", "")
    finally:
        page.close()


def test_the_timeline_draws_hostile_values_as_text(served, browser) -> None:
    requested, pointing, text = _visit(
        browser, f"{served}/timeline?key={quote(HOSTILE_KEY, safe='')}", ".js-plotly-plot",
        hover=True,
    )
    assert requested == []
    assert pointing == []
    assert f"({HOSTILE_WORKER})" in text  # the verdict names the worker, as text


def test_a_hostile_search_in_the_url_is_drawn_as_text(served, browser) -> None:
    search = f"nosuch [x]({HOSTILE_HOST}/search)"
    requested, pointing, text = _visit(
        browser, f"{served}/timeline?key={quote(search, safe='')}", '[data-testid="stAlert"]'
    )
    assert requested == [] and pointing == []
    assert f"Nothing starts with {search} in the store" in text


def test_the_overview_draws_hostile_job_types_as_text(served, browser) -> None:
    # Its charts name job types in legends and axes; the other pages' charts and text go
    # through the same helpers (tests/test_dashboard_escaping.py checks each page).
    requested, pointing, _ = _visit(browser, f"{served}/overview", ".js-plotly-plot")
    assert requested == [] and pointing == []
