"""--store: where it may be given, and a clear error for a store that cannot be used."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from forensics_cases import run

from dupescope.cli import main
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
KEY = {"idempotency_key": "inv-1"}
LINE = b'{"ts": "2025-11-30T12:00:00Z", "event": "deliver", "job_id": "j1"}\n'
#: linux/prctl.h and linux/capability.h
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def _store_with_a_duplicate(folder: Path, make_table) -> str:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:41", "side_effect")], **KEY)
    EmbeddedStore(folder).write(make_table(events))
    return str(folder)


def _keys(result) -> list[str]:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, result.output
    return [row["key"] for row in orjson.loads(result.output)]


def _without_root_powers() -> None:
    """In a child before exec: root without the capabilities that ignore file modes."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _cli(*args: str, timeout: float = 60, **popen) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    """Run the CLI; on timeout kill its whole process group (a server it may have started)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dupescope.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True, **popen,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# ---- where --store goes --------------------------------------------------------------


def test_store_may_come_before_the_command(tmp_path, make_table) -> None:
    store = _store_with_a_duplicate(tmp_path / "store", make_table)
    result = CliRunner().invoke(main, ["--store", store, "duplicates", "--format", "json"])
    assert _keys(result) == ["inv-1"]


def test_store_may_come_from_the_environment(tmp_path, make_table) -> None:
    store = _store_with_a_duplicate(tmp_path / "store", make_table)
    result = CliRunner().invoke(main, ["duplicates", "--format", "json"],
                                env={"DUPESCOPE_STORE": store})
    assert _keys(result) == ["inv-1"]


def test_the_nearest_store_wins(tmp_path, make_table) -> None:
    store = _store_with_a_duplicate(tmp_path / "store", make_table)
    (tmp_path / "empty").mkdir()
    empty = str(tmp_path / "empty")
    before = CliRunner().invoke(main, ["--store", store, "duplicates", "--format", "json"],
                                env={"DUPESCOPE_STORE": empty})
    assert _keys(before) == ["inv-1"]
    after = CliRunner().invoke(main, ["--store", empty, "duplicates", "--store", store,
                                      "--format", "json"])
    assert _keys(after) == ["inv-1"]


def test_demo_takes_the_store_before_the_command(tmp_path) -> None:
    store = tmp_path / "demo"
    result = CliRunner().invoke(main, ["--store", str(store), "demo", "--no-dashboard"])
    assert result.exit_code == 0, result.output
    assert any(store.glob("events/day=*/*.parquet"))


# ---- a query on a store that is not there ------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["duplicates"],
        ["timeline", "inv-1"],
        ["alerts"],
        ["stats"],
        ["lint"],
        ["compact"],
        ["watch", "--once"],
    ],
    ids=lambda a: a[0],
)
def test_a_query_on_a_missing_store_is_an_error(tmp_path, args) -> None:
    typo = tmp_path / "nonexistent" / "typo"
    result = CliRunner().invoke(main, [*args, "--store", str(typo)])
    assert result.exit_code == 1, result.output
    assert f"no store at '{typo}'" in result.output
    assert not typo.exists()


def test_the_dashboard_on_a_missing_store_is_an_error(tmp_path) -> None:
    typo = tmp_path / "typo"
    result = _cli("dashboard", "--store", str(typo), "--no-browser", "--port", "1", timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"no store at '{typo}'" in result.stderr


def test_a_query_on_a_file_says_it_is_a_file(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = CliRunner().invoke(main, ["duplicates", "--store", str(tmp_path / "notes.txt")])
    assert result.exit_code == 1
    assert "is a file, not a folder" in result.output


# ---- loading into a store that cannot take it ----------------------------------------------


def test_ingest_into_a_file_is_an_error(tmp_path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(LINE)
    (tmp_path / "afile").write_text("not a store")
    result = CliRunner().invoke(main, ["ingest", str(events), "--store", str(tmp_path / "afile")])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "is a file, not a folder" in result.output


def test_ingest_into_a_read_only_folder_is_an_error(tmp_path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(LINE)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        powers = {"preexec_fn": _without_root_powers} if os.geteuid() == 0 else {}
        result = _cli("ingest", str(events), "--store", str(locked), **powers)
    finally:
        locked.chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"cannot write to the store '{locked}': Permission denied" in result.stderr
    assert list(locked.iterdir()) == []


def test_collect_into_a_file_is_an_error(tmp_path) -> None:
    (tmp_path / "afile").write_text("not a store")
    result = _cli("collect", "--store", str(tmp_path / "afile"), "--http-port", "0",
                  "--grpc-port", "-1", timeout=30)
    assert result.returncode == 1, result.stderr
    assert "is a file, not a folder" in result.stderr


def test_ingest_creates_a_new_store(tmp_path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(LINE)
    result = CliRunner().invoke(main, ["ingest", str(events), "--store",
                                       str(tmp_path / "new" / "store"), "-q"])
    assert result.exit_code == 0, result.output
    assert any((tmp_path / "new" / "store").glob("events/day=*/*.parquet"))


def test_ingest_of_a_directory_says_it_is_one(tmp_path) -> None:
    (tmp_path / "adir").mkdir()
    result = CliRunner().invoke(main, ["ingest", str(tmp_path / "adir"), "--store",
                                       str(tmp_path / "store")])
    assert result.exit_code == 1
    assert f"{tmp_path / 'adir'} is a directory" in result.output
    assert "no such file" not in result.output
