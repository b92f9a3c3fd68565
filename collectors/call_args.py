"""A job's arguments read back from the call a queue's log writes (`func('k1', n=2)`).

RQ logs a job's description, by default `module.func(repr(arg), ..., key=repr(value))`;
arq logs `repr`s the same way but cuts the text at 80 characters (`…` at the end). Each
argument that is a Python literal becomes an attribute (`<prefix>.args.0`,
`<prefix>.kwargs.order_id`) that a mapping file can name as the idempotency key; an
argument cut short, or one that is no literal (an object's repr), is left out.
"""

from __future__ import annotations

import ast
from typing import Any

#: The longest call text parsed (a description can hold a whole payload).
MAX_CALL = 4096
#: Literal values kept as they are; others as their text.
_SCALARS = (str, int, float, bool)


def call_attrs(args_text: str, prefix: str) -> dict[str, Any]:
    """`'k1', 2, order_id='o-9'` (the text between a call's parentheses) -> attributes
    `{prefix}.args.0`, `{prefix}.args.1`, `{prefix}.kwargs.order_id`; empty for text that
    is no argument list. A list cut short (ending in `…`) keeps the arguments before the
    cut."""
    text = args_text.strip()
    if not text or len(text) > MAX_CALL:
        return {}
    cut = text.endswith("…")
    if cut:
        text = text[:-1]
    tree = _parse(text)
    while tree is None and cut and "," in text:  # drop the argument that was cut short
        text = text[: text.rfind(",")]
        tree = _parse(text)
    if tree is None:
        return {}
    attrs: dict[str, Any] = {}
    for index, node in enumerate(tree.args):
        value = _literal(node)
        if value is not None:
            attrs[f"{prefix}.args.{index}"] = value
    for keyword in tree.keywords:
        value = _literal(keyword.value)
        if keyword.arg is not None and value is not None:
            attrs[f"{prefix}.kwargs.{keyword.arg}"] = value
    return attrs


def split_call(description: str) -> tuple[str, str] | None:
    """`mod.func('k1')` -> (`mod.func`, `'k1'`); None for text that is no call."""
    opening = description.find("(")
    if opening <= 0 or not description.endswith(")"):
        return None
    return description[:opening], description[opening + 1 : -1]


def _parse(text: str) -> ast.Call | None:
    try:
        tree = ast.parse(f"f({text})", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    body = tree.body
    return body if isinstance(body, ast.Call) else None


def _literal(node: ast.expr) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if isinstance(value, _SCALARS):
        return value
    return repr(value)
