"""The SQL library the derivation reads: its own files, and the questions it keeps.

Derivation files live in `derive/sql/<name>.sql`, with a variant in
`derive/sql/<dialect>/` only where the dialects really differ (the most specific file
wins). A kept answer is a question asked with fixed parameters, so a name not found here
is read from the question library (`queries/sql/`) as a file; fragments are shared
(`queries/sql/fragments/`, taken in by a line `-- include: <name>`).

Queries are written with `:name` placeholders: `$name` for DuckDB, `{name:Type}` for
ClickHouse, the type taken from a `-- param name: Type` line in the file or from the
value; `literal` writes numbers and NULLs in for a CREATE ... AS, which binds nothing.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

from store.sql_files import SqlNotFound, read
from store.sql_files import with_includes as _with_includes

DERIVE_SQL_DIR = Path(__file__).parent / "sql"
QUESTIONS_DIR = Path(__file__).parents[1] / "queries" / "sql"
FRAGMENTS = QUESTIONS_DIR / "fragments"
#: The folders a name is looked up in, the first that has it wins.
FOLDERS: tuple[Path, ...] = (DERIVE_SQL_DIR, QUESTIONS_DIR)
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_DECLARED = re.compile(r"^[ \t]*--\s*param\s+(\w+)\s*:\s*(.+?)\s*$", re.MULTILINE)


def text(name: str, dialect: str) -> str:
    """The text of derivation file or question `name` in `dialect`, includes filled in."""
    for folder in FOLDERS:
        try:
            return with_includes(read(folder, name, dialect), dialect)
        except SqlNotFound:
            continue
    raise SqlNotFound(f"no SQL file named {name!r} for {dialect} in {FOLDERS}")


def with_includes(sql: str, dialect: str) -> str:
    """`sql` with each `-- include: <name>` line replaced by that question fragment's text."""
    return _with_includes(sql, FRAGMENTS, dialect)


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


#: ClickHouse fills unmatched LEFT JOIN columns with type defaults and lets an alias
#: shadow a column of the same name unless told otherwise; the query library is written
#: for standard SQL's NULLs and name resolution, so every question asked of ClickHouse
#: ends with these (the work-table statements under derive/sql/clickhouse/ end with the
#: same).
CLICKHOUSE_SETTINGS = (
    " SETTINGS join_use_nulls = 1, prefer_column_name_to_alias = 1,"
    " aggregate_functions_null_for_empty = 1"
)
