"""`dupescope dashboard` starts Streamlit on the app with the store in the environment."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

from dupescope import cli_dashboard
from dupescope.cli import main


def test_the_command_runs_streamlit_on_the_app() -> None:
    command = cli_dashboard.dashboard_command(8600)
    assert command[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(command[4]) == Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
    assert command[command.index("--server.port") + 1] == "8600"
    assert command[command.index("--server.headless") + 1] == "true"
    assert command[command.index("--server.address") + 1] == "127.0.0.1"


def test_dashboard_passes_the_store_and_port(monkeypatch, tmp_path) -> None:
    started = {}

    class Finished:
        def __init__(self, command, env, **_):
            started.update(command=command, env=env)

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(cli_dashboard.subprocess, "Popen", Finished)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    result = CliRunner().invoke(main, ["dashboard", "--store", "data", "--port", "8765",
                                       "--no-browser"])
    assert result.exit_code == 0, result.output
    assert started["env"]["DUPESCOPE_STORE"] == str(tmp_path / "data")
    assert "8765" in started["command"]
    assert "http://127.0.0.1:8765/overview" in result.output


def test_a_clickhouse_url_is_passed_as_it_is(monkeypatch) -> None:
    seen = {}
    monkeypatch.setattr(
        cli_dashboard.subprocess, "Popen", lambda command, env, **_: seen.update(env=env)
    )
    cli_dashboard.start_dashboard("clickhouse://u:p@h:8123/db", 8501)
    assert seen["env"]["DUPESCOPE_STORE"] == "clickhouse://u:p@h:8123/db"


def test_the_dashboard_never_imports_collectors() -> None:
    root = Path(__file__).resolve().parents[1] / "dashboard"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "import collectors" not in text and "from collectors" not in text, path
