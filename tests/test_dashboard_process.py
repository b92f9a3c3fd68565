"""`dupescope dashboard` as a process: it serves without asking anything, opens the browser
itself, and its Streamlit child never outlives it."""

from __future__ import annotations

import os
import pty
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dupescope import cli_dashboard

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 60
GONE_SECONDS = 15


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait(condition, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@contextmanager
def dashboard(tmp_path: Path, *args: str, **popen) -> Iterator[tuple[subprocess.Popen, int]]:  # type: ignore[no-untyped-def]
    """`dupescope dashboard` on an empty store, in its own session; it and its Streamlit
    child are killed afterwards, whatever the test did."""
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    port = _free_port()
    env = {**os.environ, "HOME": str(tmp_path), **popen.pop("env", {})}  # no saved e-mail
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    process = subprocess.Popen(
        [sys.executable, "-m", "dupescope.cli", "dashboard", "--store", str(store),
         "--port", str(port), *args],
        cwd=ROOT, env=env, start_new_session=True, **popen,
    )
    # Note the Streamlit child at once: once its parent is killed, /proc no longer ties
    # it to the test, and cleanup must still find it.
    started: set[int] = set()
    _wait(lambda: bool(started.update(_children(process.pid)) or started)
          or process.poll() is not None, 20)
    try:
        yield process, port
    finally:
        started.update(_children(process.pid))
        for pid in [process.pid, *started]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(timeout=10)


def test_streamlit_always_runs_headless() -> None:
    # Headless is what makes Streamlit skip its e-mail prompt and its "install agent
    # skills" toast (streamlit.web.skills.nudge_suppression_reason: "headless"); the toast
    # itself never shows in an automated browser, so this flag is what can be checked.
    command = cli_dashboard.dashboard_command(8600)
    assert command[command.index("--server.headless") + 1] == "true"


def test_serves_without_a_terminal_and_opens_the_browser_itself(tmp_path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n')
    browser.chmod(0o755)
    with dashboard(tmp_path, env={"BROWSER": str(browser)}) as (process, port):
        assert _wait(lambda: _healthy(port) or process.poll() is not None, START_SECONDS)
        assert process.poll() is None, f"exited with {process.returncode}"
        assert _wait(opened.exists, 10)
        assert opened.read_text().split() == [f"http://127.0.0.1:{port}/overview"]


def test_serves_from_a_terminal_without_asking_for_an_email(tmp_path) -> None:
    primary, secondary = pty.openpty()
    try:
        with dashboard(tmp_path, stdin=secondary, stdout=secondary, stderr=secondary,
                       env={"BROWSER": "/bin/true"}) as (process, port):
            assert _wait(lambda: _healthy(port) or process.poll() is not None, START_SECONDS)
            assert process.poll() is None
            os.set_blocking(primary, False)
            try:
                said = os.read(primary, 65536).decode(errors="replace")
            except BlockingIOError:
                said = ""
            assert "Email" not in said
    finally:
        os.close(primary)
        os.close(secondary)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_streamlit_dies_with_the_dashboard_command(tmp_path, signum) -> None:
    with dashboard(tmp_path, "--no-browser") as (process, port):
        assert _wait(lambda: _healthy(port), START_SECONDS)
        [child] = _children(process.pid)
        os.kill(process.pid, signum)
        if signum != signal.SIGKILL:  # a supervisor's second try, a moment later
            time.sleep(1)
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=GONE_SECONDS)
        assert _wait(lambda: not _alive(child), GONE_SECONDS), "Streamlit outlived its parent"
        assert not _listening(port)


def test_the_entry_script_runs_bare_without_error(tmp_path: Path) -> None:
    """A process whose main module was the entry script runs it again bare, without
    Streamlit's runtime (a multiprocessing fork server or spawn child does, after an
    in-process AppTest): the script must not fail there."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "dashboard" / "app.py")],
        env={**os.environ, "DUPESCOPE_STORE": str(tmp_path / "store")},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
