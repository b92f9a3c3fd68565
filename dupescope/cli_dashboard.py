"""`dupescope dashboard`: the Streamlit dashboard on a store, as a child process.

Streamlit runs its own server and event loop, so the dashboard runs as
`python -m streamlit run dashboard/app.py` with the store passed in DUPESCOPE_STORE;
`demo` and the browser tests start it the same way.

Streamlit always runs headless: otherwise its first run asks for an e-mail address on the
terminal (and exits 255 without one), and it shows an "install agent skills" toast on
every page. dupescope opens the browser itself once the server answers. The child dies
with its parent: `kill`, a hang-up or a supervisor's `kill -9` must not leave a
Streamlit server holding the port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import click

from dupescope.options import (
    DASHBOARD_PORT,
    no_browser_option,
    open_store_or_exit,
    port_option,
    store_option,
)

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
DEFAULT_PORT = DASHBOARD_PORT
#: prctl(2): deliver a signal to this process when the thread that forked it exits.
PR_SET_PDEATHSIG = 1
#: Seconds to wait for the server to answer before giving up on opening a browser.
BROWSER_WAIT_SECONDS = 60.0


def _store_value(store_url: str | None) -> str | None:
    """A folder store as an absolute path, so the child finds it whatever its cwd."""
    if store_url and "://" not in store_url:
        return str(Path(store_url).expanduser().resolve())
    return store_url


def dashboard_command(port: int, host: str = "127.0.0.1") -> list[str]:
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
        # Headless: no e-mail prompt, no browser opened by Streamlit, no skills toast.
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
    ]


def _die_with_parent() -> Callable[[], None] | None:
    """What the child runs before exec: SIGTERM when the parent dies, even by SIGKILL.

    libc is looked up here, in the parent: between fork and exec the child may only make
    plain system calls (ctypes.util.find_library would start a subprocess there).
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)  # the symbols already loaded, libc among them
    parent = os.getpid()

    def in_child() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return in_child


def start_dashboard(
    store_url: str | None,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    **popen: object,
) -> subprocess.Popen[bytes]:
    """Start the dashboard and return at once (the caller owns the process).

    The child gets SIGTERM when the thread that started it exits, so call this from the
    thread that lives as long as the dashboard should (the main thread, for the CLI).
    """
    env = dict(os.environ)
    store = _store_value(store_url)
    if store:
        env["DUPESCOPE_STORE"] = store
    return subprocess.Popen(  # type: ignore[call-overload]
        dashboard_command(port, host), env=env, preexec_fn=_die_with_parent(), **popen
    )


def _served(base: str, process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until the server answers its health check (False: it exited or timed out)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def _open_browser_when_served(url: str, base: str, process: subprocess.Popen[bytes]) -> None:
    if _served(base, process, BROWSER_WAIT_SECONDS):
        import webbrowser

        try:
            webbrowser.open(url)
        except webbrowser.Error:  # no browser here: the URL is printed already
            pass


def _browser_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def launch_dashboard(
    store_url: str | None,
    port: int = DEFAULT_PORT,
    open_browser: bool = True,
    host: str = "127.0.0.1",
    path: str = "overview",
) -> int:
    """Serve the dashboard until it exits, the user presses Ctrl-C or we are told to stop.

    SIGTERM and SIGHUP are passed on to Streamlit, and we return its exit code.
    """
    base = f"http://{_browser_host(host)}:{port}"
    click.echo(f"dupescope dashboard on http://{host}:{port}/overview", err=True)
    process = start_dashboard(store_url, port, host)

    def forward(signum: int, _frame: object) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if open_browser:
            threading.Thread(
                target=_open_browser_when_served,
                args=(f"{base}/{path}", base, process),
                daemon=True,
                name="open-browser",
            ).start()
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@click.command()
@store_option
@port_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 to serve other machines).",
)
@no_browser_option
def dashboard(store_url: str | None, port: int, host: str, no_browser: bool) -> None:
    """Start the Streamlit dashboard on the store."""
    # Fail here, in words, rather than serve pages that say a mistyped store is empty.
    open_store_or_exit(store_url, existing=True).close()
    sys.exit(launch_dashboard(store_url, port, open_browser=not no_browser, host=host))
