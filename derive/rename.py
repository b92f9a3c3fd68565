"""Reading a query file over other tables than it names: its table names swapped by token.

A derivation runs the same query files as a build, over work tables of its own (ClickHouse's
`derive_work_*`), and a question asked of touched units reads the `only_derived_*` tables.
The names are swapped in the tokens of the text, not by a pattern over it: an identifier
is renamed wherever it stands (a qualified column too), a string or a comment that happens
to spell it is left alone, and the rest of the text is sent as written.

DuckDB's text is split by DuckDB's own tokenizer, ClickHouse's by sqlglot's: a reader of
the embedded store attaches its kept state through here, and loading sqlglot's dialect
cost each new process a quarter of a second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

#: A word at a DuckDB token's start: a quoted identifier or a plain one.
_WORD = re.compile(r'"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*')


@dataclass(frozen=True)
class Token:
    """A token's place in the text, and what it is: `name` (an identifier, unquoted),
    `reads` (FROM or JOIN), `final` (ClickHouse's FINAL) or `other`."""

    start: int
    end: int
    kind: str
    text: str


def renamed(sql: str, dialect: str, tables: Mapping[str, str],
            sources: Mapping[str, str] | None = None) -> str:
    """`sql` with every identifier named in `tables` replaced by its new name; a name in
    `sources` (one that is also a column's, like `events`) only where a FROM or JOIN
    reads it, a FINAL after it dropped (a work table needs none)."""
    tokens = duckdb_tokens(sql) if dialect == "duckdb" else sqlglot_tokens(sql, dialect)
    return renamed_by(sql, tokens, tables, sources)


def renamed_by(sql: str, tokens: list[Token], tables: Mapping[str, str],
               sources: Mapping[str, str] | None = None) -> str:
    """`renamed` over `sql` split into `tokens` already."""
    pieces: list[str] = []
    done = 0
    skip_to = -1
    for i, token in enumerate(tokens):
        if token.start < skip_to:
            continue
        new, end = _replacement(tokens, i, tables, sources or {})
        if new is None:
            continue
        pieces += [sql[done:token.start], new]
        done = skip_to = end
    return "".join(pieces) + sql[done:]


def duckdb_tokens(sql: str) -> list[Token]:
    """DuckDB's tokens of `sql`."""
    found = []
    for start, kind in duckdb.tokenize(sql):
        word = _WORD.match(sql, start)
        if word is None or kind not in (duckdb.token_type.identifier,
                                        duckdb.token_type.keyword):
            found.append(Token(start, start, "other", ""))
            continue
        text = word.group()
        if kind == duckdb.token_type.keyword and text.upper() in ("FROM", "JOIN"):
            found.append(Token(start, word.end(), "reads", text))
            continue
        # A keyword DuckDB does not reserve may name a table too (sqlglot calls it a VAR).
        name = text[1:-1].replace('""', '"') if text.startswith('"') else text
        found.append(Token(start, word.end(), "name", name))
    return found


def sqlglot_tokens(sql: str, dialect: str) -> list[Token]:
    """sqlglot's tokens of `sql` in `dialect` (imported on first use)."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokenizer_core import TokenType

    kinds = {TokenType.VAR: "name", TokenType.IDENTIFIER: "name", TokenType.FROM: "reads",
             TokenType.JOIN: "reads", TokenType.FINAL: "final"}
    return [Token(t.start, t.end + 1, kinds.get(t.token_type, "other"), t.text)
            for t in Dialect.get_or_raise(dialect).tokenize(sql)]


def _replacement(tokens: list[Token], i: int, tables: Mapping[str, str],
                 sources: Mapping[str, str]) -> tuple[str | None, int]:
    """The new text of token `i` and where the text it replaces ends (None: kept)."""
    token = tokens[i]
    if token.kind != "name":
        return None, 0
    if token.text in tables:
        return tables[token.text], token.end
    if token.text in sources and i > 0 and tokens[i - 1].kind == "reads":
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is not None and following.kind == "final":
            return sources[token.text], following.end
        return sources[token.text], token.end
    return None, 0


def inlined(sql: str, dialect: str, relations: Mapping[str, str]) -> str:
    """`sql` with each relation named in `relations` read as that query instead, as a
    subquery of the same name, where a FROM or JOIN reads it: a query file that filters or
    wraps another one names it as a table, and the two are put together by token."""
    subqueries = {name: f"({query}\n) AS {name}" for name, query in relations.items()}
    return renamed(sql, dialect, {}, sources=subqueries)
