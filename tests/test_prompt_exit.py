"""The `dupescope` program ends without teardown after a command whose work is on disk,
and still says everything it had to say, with the command's exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
GOOD = b'{"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": "j1"}\n'


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with its output block-buffered, as a program's is into a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env=env,
    )


def _program(body: str, *, ask: bool) -> str:
    """A script whose click-like main prints, registers a teardown step and exits 3."""
    return (
        "import atexit, sys\n"
        "from dupescope import prompt_exit\n"
        "def main():\n"
        "    atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
        f"    {body}\n"
        + ("    prompt_exit.ask()\n" if ask else "")
        + "    sys.exit(3)\n"
        "prompt_exit.run(main)\n"
    )


def test_an_asked_exit_skips_the_teardown_but_keeps_the_output_and_status() -> None:
    # Output to a pipe is block-buffered: without a flush before the exit it is lost.
    done = _python(_program("print('summary', end='')", ask=True))
    assert done.returncode == 3
    assert done.stdout == "summary"
    assert "teardown ran" not in done.stderr


def test_without_asking_the_program_exits_as_usual() -> None:
    done = _python(_program("print('summary', end='')", ask=False))
    assert done.returncode == 3
    assert done.stdout == "summary"
    assert "teardown ran" in done.stderr


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (2, 2), (256 + 7, 7), ("a message", 1)]
)
def test_exit_status_follows_sys_exit(code: object, status: int) -> None:
    from dupescope.prompt_exit import exit_status

    assert exit_status(code) == status


def test_ingest_through_the_program_reports_its_rejects_and_keeps_its_rows(tmp_path) -> None:
    source = tmp_path / "events.jsonl"
    source.write_bytes(GOOD + b'{"ts": \n')
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-m", "dupescope.cli", "ingest", "--strict", "--store", str(store),
         str(source)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr  # --strict with a rejected line
    assert f"rejected {source}:2: invalid JSON" in done.stderr
    assert "1 events stored from 1 file(s), 2 lines; 1 rejected" in done.stderr
    rows = EmbeddedStore(store).execute("SELECT job_id FROM events")
    assert rows["job_id"].tolist() == ["j1"]
