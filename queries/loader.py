"""Named SQL files -> a query in the store's dialect, with parameters bound.

Queries are written once with `:name` placeholders in `queries/sql/<name>.sql`; where
ClickHouse really differs, `queries/sql/clickhouse/<name>.sql` wins for that dialect (the
most specific file wins). Placeholders become `$name` for DuckDB and `{name:Type}` for
ClickHouse, the type taken from a `-- param name: Type` line in the file or from the value.

A condition several questions share (the execution filters, say) is written once, in
`queries/sql/fragments/<name>.sql`, and a query takes it in with a line of its own,
`-- include: <name>`, which `sql_text` replaces with the fragment's text (indented as the
line is, the fragment found per dialect like any file) before placeholders are looked for;
a fragment declares the parameters it uses and includes nothing itself.

Finding a file is store/sql_files.py's, shared with the store's and the alert state's own
statements (store/sql/, alerts/sql/), which are written in their engine's own syntax; that
docstring says where each kind of SQL lives.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from store.base import Store
from store.sql_files import SqlNotFound, read

if TYPE_CHECKING:
    import pandas as pd

SQL_DIR = Path(__file__).parent / "sql"
FRAGMENTS = SQL_DIR / "fragments"
#: The derivation's files (derive/sql/), found by name like the questions.
DERIVE_SQL_DIR = Path(__file__).parents[1] / "derive" / "sql"
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_DECLARED = re.compile(r"^[ \t]*--\s*param\s+(\w+)\s*:\s*(.+?)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^([ \t]*)--\s*include:\s*(\w+)\s*$", re.MULTILINE)


QueryNotFound = SqlNotFound


def sql_text(name: str, dialect: str) -> str:
    """The text of query `name` in `dialect`, its `-- include:` lines filled in."""
    try:
        text = read(SQL_DIR, name, dialect)
    except SqlNotFound:
        text = read(DERIVE_SQL_DIR, name, dialect)
    return with_includes(text, dialect)


def with_includes(sql: str, dialect: str) -> str:
    """`sql` with each `-- include: <name>` line replaced by that fragment's text."""

    def fragment(match: re.Match[str]) -> str:
        indent, name = match.groups()
        text = read(FRAGMENTS, name, dialect).rstrip("\n")
        return "\n".join(indent + line if line else line for line in text.splitlines())

    return _INCLUDE.sub(fragment, sql)


def query_names() -> list[str]:
    return sorted(p.stem for p in SQL_DIR.glob("*.sql"))


def _clickhouse_type(value: Any) -> str:
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, int):
        return "Int64"
    if isinstance(value, float):
        return "Float64"
    if isinstance(value, datetime):
        return "DateTime64(6, 'UTC')"
    if isinstance(value, date):
        return "Date"
    if isinstance(value, list | tuple):
        inner = _clickhouse_type(value[0]) if value else "String"
        return f"Array({inner.removeprefix('Nullable(').removesuffix(')')})"
    return "String"


def _nullable(kind: str) -> str:
    if kind.startswith(("Nullable(", "Array(", "LowCardinality(")):
        return kind
    return f"Nullable({kind})"


def render(sql: str, dialect: str, params: dict[str, Any]) -> str:
    """Rewrite `:name` placeholders for the dialect; values stay out of the SQL text."""
    missing = sorted(set(_PLACEHOLDER.findall(_strip_comments(sql))) - set(params))
    if missing:
        raise TypeError(f"query needs parameters: {', '.join(missing)}")
    if dialect == "duckdb":
        return _PLACEHOLDER.sub(lambda m: f"${m.group(1)}", _strip_comments(sql))
    declared = dict(_DECLARED.findall(sql))

    def typed(match: re.Match[str]) -> str:
        name = match.group(1)
        kind = declared.get(name) or _clickhouse_type(params[name])
        return "{" + f"{name}:{_nullable(kind)}" + "}"

    return _PLACEHOLDER.sub(typed, _strip_comments(sql))


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    raise TypeError(f"no SQL literal for {value!r}")


def literal(sql: str, params: dict[str, Any]) -> str:
    """The query with its parameters written in as literals, for a CREATE ... AS (which
    binds no placeholders); numbers and NULLs only, as text quoting differs by dialect."""
    missing = sorted(placeholders(sql) - set(params))
    if missing:
        raise TypeError(f"query needs parameters: {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: _literal(params[m.group(1)]), _strip_comments(sql))


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def placeholders(sql: str) -> set[str]:
    """The `:name` parameters a query text uses (comments aside)."""
    return set(_PLACEHOLDER.findall(_strip_comments(sql)))


def run(store: Store, name: str, **params: Any) -> pd.DataFrame:
    """Run the named query on `store` and return a data frame."""
    sql = render(sql_text(name, store.dialect), store.dialect, params)
    used = placeholders(sql_text(name, store.dialect))
    return store.execute(sql, {k: v for k, v in params.items() if k in used})
