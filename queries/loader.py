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

Reading and binding are derive/library.py's (the derivation reads the same files);
finding a file is store/sql_files.py's, shared with the store's and the alert state's own
statements (store/sql/, alerts/sql/), which are written in their engine's own syntax; that
docstring says where each kind of SQL lives.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from derive.library import (
    DERIVE_SQL_DIR,
    FRAGMENTS,
    literal,
    placeholders,
    render,
    with_includes,
)
from store.base import Store
from store.sql_files import SqlNotFound, read

if TYPE_CHECKING:
    import pandas as pd

SQL_DIR = Path(__file__).parent / "sql"


QueryNotFound = SqlNotFound

__all__ = ["DERIVE_SQL_DIR", "FRAGMENTS", "SQL_DIR", "QueryNotFound", "literal",
           "placeholders", "render", "run", "sql_text", "with_includes"]


def sql_text(name: str, dialect: str) -> str:
    """The text of query `name` in `dialect`, its `-- include:` lines filled in."""
    return with_includes(read(SQL_DIR, name, dialect), dialect)


def query_names() -> list[str]:
    return sorted(p.stem for p in SQL_DIR.glob("*.sql"))


def run(store: Store, name: str, **params: Any) -> pd.DataFrame:
    """Run the named query on `store` and return a data frame."""
    sql = render(sql_text(name, store.dialect), store.dialect, params)
    used = placeholders(sql_text(name, store.dialect))
    return store.execute(sql, {k: v for k, v in params.items() if k in used})
