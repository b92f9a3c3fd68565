"""Every `.sql` file parses, with sqlglot, in each dialect it serves.

A file `<folder>/<name>.sql` serves each dialect its folder's code runs on, unless
`<folder>/<dialect>/<name>.sql` overrides it there; a file in a dialect subfolder serves
that dialect (store/sql_files.py). Query files are parsed as the loader sends them, their
`-- include:` lines filled in and `:name` placeholders rewritten for the dialect; the others
are in their engine's syntax. A fragment (queries/sql/fragments/) is no statement of its
own: it is parsed inside each query that includes it, and must be included by one; so is
a fragment of the store's statements (store/sql/fragments/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from queries.loader import (
    DERIVE_SQL_DIR,
    FRAGMENTS,
    SQL_DIR,
    placeholders,
    render,
    with_includes,
)
from store.sql_files import DIALECTS, SqlNotFound, with_identifiers
from store.sql_files import with_includes as with_store_includes

ROOT = Path(__file__).resolve().parents[1]
STORE_SQL = ROOT / "store" / "sql"
STORE_FRAGMENTS = STORE_SQL / "fragments"

#: Folder of named SQL -> the dialects its shared (top-level) files serve.
FOLDERS: dict[Path, tuple[str, ...]] = {
    SQL_DIR: ("duckdb", "clickhouse"),
    DERIVE_SQL_DIR: ("duckdb", "clickhouse"),
    STORE_SQL: ("duckdb", "clickhouse"),
    ROOT / "alerts" / "sql": (),  # SQLite and ClickHouse have a file each, no shared one
}

#: Files sqlglot reads only as an opaque command (it lacks the statement), with why.
#: Each is listed by path and dialect, so a new one is a decision, not a silent skip.
OPAQUE: dict[tuple[str, str], str] = {}


def claims() -> list[tuple[Path, str]]:
    """(file, dialect) for every SQL file and each dialect it serves."""
    found = []
    for folder, shared in FOLDERS.items():
        for path in sorted(folder.glob("*.sql")):
            found += [(path, d) for d in shared if not (folder / d / path.name).exists()]
        for sub in sorted(p for p in folder.iterdir() if _dialect_folder(p)):
            found += [(path, sub.name) for path in sorted(sub.glob("*.sql"))]
    return found


def _dialect_folder(path: Path) -> bool:
    return path.is_dir() and path.name != "__pycache__" and path not in (FRAGMENTS,
                                                                          STORE_FRAGMENTS)


def sent_text(path: Path, dialect: str) -> str:
    """The statement as its engine receives it (identifiers filled in with a stand-in)."""
    text = path.read_text()
    if path.is_relative_to(SQL_DIR) or path.is_relative_to(DERIVE_SQL_DIR):
        text = with_includes(text, dialect)
        text = render(text, dialect, {name: None for name in placeholders(text)})
    elif path.is_relative_to(STORE_SQL):
        text = with_store_includes(text, STORE_FRAGMENTS, dialect)
    return with_identifiers(text, **{name: "some_name" for name in _identifiers(text)})


def _identifiers(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+):Identifier\}", text))


CLAIMS = claims()


def test_every_sql_file_is_claimed_by_some_dialect():
    packages = ("collectors", "store", "derive", "queries", "alerts", "dashboard", "dupescope",
                "sample_data")
    everywhere = {p for package in packages for p in (ROOT / package).rglob("*.sql")}
    fragments = set(FRAGMENTS.rglob("*.sql")) | set(STORE_FRAGMENTS.rglob("*.sql"))
    assert everywhere - fragments == {path for path, _ in CLAIMS}


def _included(within: tuple[Path, ...]) -> set[str]:
    return {
        name for path, _ in CLAIMS if any(path.is_relative_to(folder) for folder in within)
        for name in re.findall(r"^\s*--\s*include:\s*(\w+)\s*$", path.read_text(), re.M)
    }


def test_every_fragment_is_included_by_some_query():
    included = _included((SQL_DIR, DERIVE_SQL_DIR))
    assert {path.stem for path in FRAGMENTS.rglob("*.sql")} == included


def test_every_store_fragment_is_included_by_some_store_statement():
    included = _included((STORE_SQL,))
    assert {path.stem for path in STORE_FRAGMENTS.rglob("*.sql")} == included


def test_an_include_fills_in_the_fragment_at_the_line_s_indent():
    sent = with_includes("WHERE\n    -- include: execution_filters\n", "duckdb")
    assert "    (:job_type IS NULL OR job_type = :job_type)\n    AND (:queue" in sent
    assert not re.search(r"^\s*-- include:", sent, re.M)


def test_an_include_of_no_fragment_fails():
    with pytest.raises(SqlNotFound):
        with_includes("SELECT 1 WHERE\n-- include: no_such_fragment\n", "duckdb")


def test_dialect_folders_are_known_dialects():
    subfolders = {
        sub.name for folder in FOLDERS for sub in folder.iterdir() if _dialect_folder(sub)
    }
    assert subfolders <= set(DIALECTS)


@pytest.mark.parametrize(
    ("path", "dialect"), CLAIMS, ids=[f"{p.relative_to(ROOT)}-{d}" for p, d in CLAIMS]
)
def test_sql_file_parses_in_its_dialect(path: Path, dialect: str):
    statements = sqlglot.parse(sent_text(path, dialect), read=dialect)
    assert len(statements) == 1, "one statement per file"
    opaque = (str(path.relative_to(ROOT)), dialect) in OPAQUE
    assert isinstance(statements[0], exp.Command) == opaque


def test_every_opaque_file_is_one_of_the_claimed():
    assert set(OPAQUE) <= {(str(p.relative_to(ROOT)), d) for p, d in CLAIMS}


def test_an_unparseable_file_fails():
    with pytest.raises(sqlglot.errors.ParseError):
        sqlglot.parse("SELECT count( FROM events", read="duckdb")
