"""A reader's DuckDB spills into the system's temporary folder, not where it was started."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from derive.embedded import incremental
from store.embedded import EmbeddedStore


@pytest.fixture
def started_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the working directory, the system's temporary folder), both empty."""
    cwd, temporary = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    temporary.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    return cwd, temporary


def _spills(con) -> None:  # type: ignore[no-untyped-def]
    con.execute("SET memory_limit = '64MB'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("CREATE TEMP TABLE big AS SELECT range AS n, md5(range::VARCHAR) AS t "
                "FROM range(3000000)")
    assert con.execute("SELECT count(*) FROM (SELECT * FROM big ORDER BY t)").fetchone()[0]


def test_a_store_reader_spills_into_the_temporary_folder(started_elsewhere, tmp_path) -> None:
    cwd, temporary = started_elsewhere
    store = EmbeddedStore(tmp_path / "store")
    con = store.connection()
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert Path(spill).parent == temporary
    _spills(con)
    store.close()
    assert list(cwd.iterdir()) == []


def test_a_derivation_s_own_connection_spills_there_too(started_elsewhere) -> None:
    cwd, temporary = started_elsewhere
    con = incremental.connection()
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert Path(spill).parent == temporary
    _spills(con)
    con.close()
    assert list(cwd.iterdir()) == []
