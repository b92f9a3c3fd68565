"""`dupescope dashboard`: the Streamlit dashboard on a store, as a child process.

Streamlit runs its own server and event loop, so the dashboard runs as
`python -m streamlit run dashboard/app.py` with the store passed in DUPESCOPE_STORE;
`demo` and the browser tests start it the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
DEFAULT_PORT = 8501


def _store_value(store_url: str | None) -> str | None:
    """A folder store as an absolute path, so the child finds it whatever its cwd."""
    if store_url and "://" not in store_url:
        return str(Path(store_url).expanduser().resolve())
    return store_url


def dashboard_command(port: int, open_browser: bool, host: str = "127.0.0.1") -> list[str]:
    """The command line that serves the dashboard."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "false" if open_browser else "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
    ]


def start_dashboard(
    store_url: str | None,
    port: int = DEFAULT_PORT,
    open_browser: bool = False,
    host: str = "127.0.0.1",
    **popen: object,
) -> subprocess.Popen[bytes]:
    """Start the dashboard and return at once (the caller owns the process)."""
    env = dict(os.environ)
    store = _store_value(store_url)
    if store:
        env["DUPESCOPE_STORE"] = store
    return subprocess.Popen(dashboard_command(port, open_browser, host), env=env, **popen)  # type: ignore[call-overload]


def launch_dashboard(
    store_url: str | None,
    port: int = DEFAULT_PORT,
    open_browser: bool = True,
    host: str = "127.0.0.1",
) -> int:
    """Serve the dashboard until it exits or the user presses Ctrl-C; its exit code."""
    click.echo(f"dupescope dashboard on http://{host}:{port}/overview", err=True)
    process = start_dashboard(store_url, port, open_browser, host)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


@click.command()
@click.option(
    "--store",
    "store_url",
    envvar="DUPESCOPE_STORE",
    help="Where events live: a folder, clickhouse://user:pass@host:8123/db or chdb:///path. "
    "Default: $DUPESCOPE_STORE or ./dupescope-data.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 to serve other machines).",
)
@click.option(
    "--no-browser",
    "--headless",
    "no_browser",
    is_flag=True,
    help="Do not open a browser (servers, containers, CI).",
)
def dashboard(store_url: str | None, port: int, host: str, no_browser: bool) -> None:
    """Start the Streamlit dashboard on the store."""
    sys.exit(launch_dashboard(store_url, port, open_browser=not no_browser, host=host))
