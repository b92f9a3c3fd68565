"""Helpers for the dashboard's AppTest cases: a store of the inline stories, the app."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
PAGES = {
    "overview": "app_pages/overview.py",
    "timeline": "app_pages/timeline.py",
    "durations": "app_pages/durations.py",
    "alerts": "app_pages/alerts.py",
    "checklist": "app_pages/checklist.py",
    "whatif": "app_pages/whatif.py",
    "report": "app_pages/report.py",
}


def open_page(page: str, **query: str) -> AppTest:
    """Run the app on `page` (as a deep link with `query` would) and return it."""
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    for name, value in query.items():
        app.query_params[name] = value
    if page != "overview":
        app.switch_page(PAGES[page])
    return app.run()


def shown(markdown: str) -> str:
    """What a reader sees of Markdown whose punctuation is backslash-escaped (and whose
    autolink triggers hold an invisible word joiner)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def texts(elements) -> list[str]:  # type: ignore[no-untyped-def]
    """The text of each element as shown (escaped data values read as themselves)."""
    return [shown(str(element.value)) for element in elements]


def frame_with(app: AppTest, column: str):  # type: ignore[no-untyped-def]
    """The first data frame on the page that has `column`."""
    for element in app.dataframe:
        if column in element.value.columns:
            return element.value
    raise AssertionError(f"no data frame with a {column!r} column")
