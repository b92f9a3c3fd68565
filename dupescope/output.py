"""Rendering answers for the terminal and for other tools (table, JSON, CSV)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
import orjson

if TYPE_CHECKING:  # imported where used: `dupescope ingest` and its workers never need it
    import pandas as pd

FORMATS = ("table", "json", "csv")


def _plain(value: Any) -> Any:
    """JSON-ready values: times as RFC 3339 UTC, missing values as null."""
    import pandas as pd

    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp | datetime):
        stamp = value.tz_convert("UTC") if isinstance(value, pd.Timestamp) else value
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is pd.NA:
        return None
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def emit_json(rows: list[dict[str, Any]]) -> None:
    """Print JSON-ready rows (see `records`) as one JSON array."""
    click.echo(orjson.dumps(rows).decode())


def emit(frame: pd.DataFrame, fmt: str, *, empty: str = "nothing found") -> None:
    """Print `frame` as one JSON array, CSV, or an aligned table."""
    import pandas as pd

    if fmt == "json":
        emit_json(records(frame))
    elif fmt == "csv":
        click.echo(
            pd.DataFrame(records(frame), columns=frame.columns).to_csv(index=False), nl=False
        )
    elif frame.empty:
        click.echo(empty)
    else:
        rows = records(frame)
        shown = pd.DataFrame(
            {c: ["" if r[c] is None else str(r[c]) for r in rows] for c in frame.columns}
        )
        click.echo(shown.to_string(index=False, max_colwidth=60))
