"""Named SQL files: one statement per file, named for what it does, read by name.

Each stage keeps its SQL in a `sql/` folder beside the code that runs it:

- `queries/sql/`: the questions, with `:name` placeholders that queries/loader.py binds
  in each dialect;
- `store/sql/`: the store's own statements (the mapping and refill of the OpenTelemetry
  exporter's tables, the embedded store's derived-table files);
- `alerts/sql/`: the alert state's tables and statements, one folder per engine.

`<folder>/<name>.sql` serves every dialect the folder's code runs on; where one really
differs, `<folder>/<dialect>/<name>.sql` wins for it (the most specific file wins). Files
outside queries/ are written in their engine's own parameter syntax (`{name:Type}` for
ClickHouse, `:name` for SQLite, `$name` for DuckDB). tests/test_sql_files.py parses
every file with sqlglot in each dialect it serves.

The lookup sits in store/, the lowest stage that runs SQL, so that store, queries and
alerts read their files one way while imports still point from queries to store.

Values are always bound. Only identifiers (a database name chosen by the user, a table
named at run time), which no engine binds in DDL, go into the text: a file writes them as
`{name:Identifier}`, ClickHouse's own spelling of an identifier parameter (so the file
parses as it stands), and `with_identifiers` puts in names checked to be plain
identifiers.

Text several files share (a condition, a table of constants) is written once as a
fragment, in a `fragments/` folder beside them, and a file takes it in with a line of its
own, `-- include: <name>` (`with_includes`): the questions' fragments are
queries/sql/fragments/, the store's store/sql/fragments/.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

DIALECTS = ("duckdb", "clickhouse", "sqlite")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IDENTIFIER_SLOT = re.compile(r"\{(\w+):Identifier\}")
_INCLUDE = re.compile(r"^([ \t]*)--\s*include:\s*(\w+)\s*$", re.MULTILINE)


class SqlNotFound(LookupError):
    pass


@cache
def read(folder: Path, name: str, dialect: str) -> str:
    """The text of statement `name` in `dialect` from `folder` (its dialect subfolder first)."""
    for path in (folder / dialect / f"{name}.sql", folder / f"{name}.sql"):
        if path.exists():
            return path.read_text()
    raise SqlNotFound(f"no SQL file named {name!r} for {dialect} in {folder}")


def with_includes(sql: str, fragments: Path, dialect: str) -> str:
    """`sql` with each `-- include: <name>` line replaced by that fragment's text from
    `fragments` (its dialect subfolder first), indented as the line is."""

    def fragment(match: re.Match[str]) -> str:
        indent, name = match.groups()
        text = read(fragments, name, dialect).rstrip("\n")
        return "\n".join(indent + line if line else line for line in text.splitlines())

    return _INCLUDE.sub(fragment, sql)


def with_identifiers(sql: str, **names: str) -> str:
    """`sql` with each `{name:Identifier}` replaced by its plain identifier (checked)."""
    for value in names.values():
        if not _IDENTIFIER.match(value):
            raise ValueError(f"not a plain identifier: {value!r}")

    def identifier(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            raise TypeError(f"statement needs the identifier {match.group(1)!r}")
        return names[match.group(1)]

    return _IDENTIFIER_SLOT.sub(identifier, sql)


def literal(text: str | Path) -> str:
    """A SQL string literal of `text` (a file path or metadata in COPY, or in a view over
    files: places where DuckDB takes no parameter)."""
    return "'" + str(text).replace("'", "''") + "'"
