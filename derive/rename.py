"""Reading a query file over other tables than it names: its table names swapped by token.

A derivation runs the same query files as a build, over work tables of its own (ClickHouse's
`derive_work_*`), and a question asked of touched units reads the `only_derived_*` tables.
The names are swapped in sqlglot's tokens of the text, not by a pattern over it: an
identifier is renamed wherever it stands (a qualified column too), a string or a comment
that happens to spell it is left alone, and the rest of the text is sent as written.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot.dialects.dialect import Dialect
from sqlglot.tokenizer_core import Token, TokenType

_IDENTIFIERS = (TokenType.VAR, TokenType.IDENTIFIER)
_READS = (TokenType.FROM, TokenType.JOIN)


def renamed(sql: str, dialect: str, tables: Mapping[str, str],
            sources: Mapping[str, str] | None = None) -> str:
    """`sql` with every identifier named in `tables` replaced by its new name; a name in
    `sources` (one that is also a column's, like `events`) only where a FROM or JOIN
    reads it, a FINAL after it dropped (a work table needs none)."""
    tokens = Dialect.get_or_raise(dialect).tokenize(sql)
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


def _replacement(tokens: list[Token], i: int, tables: Mapping[str, str],
                 sources: Mapping[str, str]) -> tuple[str | None, int]:
    """The new text of token `i` and where the text it replaces ends (None: kept)."""
    token = tokens[i]
    if token.token_type not in _IDENTIFIERS:
        return None, 0
    if token.text in tables:
        return tables[token.text], token.end + 1
    if token.text in sources and i > 0 and tokens[i - 1].token_type in _READS:
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is not None and following.token_type == TokenType.FINAL:
            return sources[token.text], following.end + 1
        return sources[token.text], token.end + 1
    return None, 0


def inlined(sql: str, dialect: str, relations: Mapping[str, str]) -> str:
    """`sql` with each relation named in `relations` read as that query instead, as a
    subquery of the same name, where a FROM or JOIN reads it: a query file that filters or
    wraps another one names it as a table, and the two are put together by token."""
    subqueries = {name: f"({query}\n) AS {name}" for name, query in relations.items()}
    return renamed(sql, dialect, {}, sources=subqueries)
