"""The "What if" page in a real headless Chromium: a setting moves the chart, a key opens
its timeline."""

from __future__ import annotations

import os

import pytest
from conftest import events_to_table
from forensics_cases import run

from store.embedded import EmbeddedStore

pytestmark = pytest.mark.browser

READ_BARS = """() => {
  const plot = document.querySelector('.js-plotly-plot');
  if (!plot || !plot._fullData) return null;
  return JSON.stringify(plot._fullData.map(t => [t.name, Array.from(t.x)]));
}"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from dashboard.screenshots import CHROMIUM, serving

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)")
    folder = tmp_path_factory.mktemp("whatif-browser") / "store"
    store = EmbeddedStore(folder)
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")],
                 idempotency_key="inv-1")
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")],
                  idempotency_key="inv-1")
    store.write(events_to_table(events))
    store.close()
    with serving(str(folder)) as base:
        yield base


def test_moving_a_setting_changes_the_chart_and_a_key_opens_its_timeline(served) -> None:
    from dashboard.screenshots import browser_page, settle

    with browser_page() as page:
        page.goto(f"{served}/whatif?visibility_timeout=35")
        settle(page, ".js-plotly-plot")
        before = page.evaluate(READ_BARS)
        assert '"duplicates with the settings",[1]' in before
        field = page.get_by_role("spinbutton", name="Visibility timeout (s)")
        field.fill("60")
        field.press("Enter")
        page.wait_for_function(f"() => ({READ_BARS})() !== {before!r}", timeout=60_000)
        after = page.evaluate(READ_BARS)
        assert '"duplicates with the settings",[0]' in after
        link = page.get_by_role("link", name="inv-1")
        link.click()
        page.wait_for_url("**/timeline?key=inv-1", timeout=30_000)
        settle(page, ".js-plotly-plot")
        verdict = page.locator('[data-testid="stAlert"]').first.inner_text()
        assert "Delivered twice because" in verdict
