"""Screenshots of every page over the shipped sample: `python -m dashboard.screenshots`.

Serves the dashboard on a free local port, drives Debian's Chromium through playwright
(never a downloaded browser) and writes docs/screenshots/<page>.png. The browser test
uses the same helpers.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SAMPLE = ROOT / "sample_data" / "sample.jsonl.gz"
#: Page path -> what shows the page has finished drawing.
PAGES = {
    "overview": ".js-plotly-plot",
    "timeline": ".js-plotly-plot",
    "durations": ".js-plotly-plot",
    "alerts": '[data-testid="stDataFrame"]',
    "checklist": ".js-plotly-plot",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def load_sample(store: Path, sample: Path = SAMPLE) -> None:
    """Ingest the sample with the CLI (the dashboard itself never imports collectors)."""
    subprocess.run(
        [sys.executable, "-m", "dupescope.cli", "ingest", str(sample), "--store", str(store),
         "-q"],
        cwd=ROOT, check=True, capture_output=True,
    )


@contextmanager
def serving(store: str, port: int | None = None, timeout: float = 60) -> Iterator[str]:
    """The dashboard served on 127.0.0.1 for the duration of the block; yields its URL."""
    from dupescope.cli_dashboard import start_dashboard

    port = port or free_port()
    process = start_dashboard(store, port, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the dashboard did not start") from None
                time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def browser_page(width: int = 1440, height: int = 1300) -> Iterator[Any]:
    """A playwright page in headless Debian Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def settle(page: Any, ready: str, timeout_ms: int = 60_000) -> None:
    """Wait until the page drew `ready` and Streamlit stopped running the script."""
    page.wait_for_selector(ready, timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=timeout_ms,
    )
    page.wait_for_timeout(1200)  # Plotly animates its first draw


def worst_key(store: str) -> str:
    """The harmful duplicate with the most executions: the one worth a screenshot."""
    import queries
    from store import open_store

    found = queries.duplicates(open_store(store))
    ranked = found.assign(harmful=found["outcome"] == "harmful").sort_values(
        ["harmful", "lock_expired_while_running", "executions"], ascending=False)
    return str(ranked.iloc[0]["key"])


def take(store: str, out: Path, key: str | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    key = key or worst_key(store)
    written = []
    with serving(store) as base, browser_page() as page:
        for name, ready in PAGES.items():
            query = f"?key={key}" if name == "timeline" else ""
            page.goto(f"{base}/{name}{query}")
            settle(page, ready)
            path = out / f"{name}.png"
            page.screenshot(path=str(path), full_page=True)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store to show (default: the shipped sample, loaded)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--key", help="key for the timeline (default: the worst duplicate)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        store = options.store
        if store is None:
            store = str(Path(scratch) / "store")
            load_sample(Path(store))
        for path in take(store, options.out, options.key):
            print(path)


if __name__ == "__main__":
    main()
