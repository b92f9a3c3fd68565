"""Rendering answers for the terminal and for other tools (table, JSON, CSV)."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

import click
import orjson

if TYPE_CHECKING:  # imported where used: `dupescope ingest` and its workers never need it
    import pandas as pd
    import pyarrow as pa

FORMATS = ("table", "json", "csv")
#: What follows each row of a JSON array printed from JSON lines (the last one's gives
#: way to the array's end): what the kept listing prints too.
_SEPARATOR = b",\n"


#: The types pandas marks a missing value with (NaT, NA), told by name so that a row of
#: plain values is made JSON-ready without importing pandas.
_MISSING_TYPES = frozenset({"NaTType", "NAType"})


def plain(value: Any) -> Any:
    """JSON-ready values: times as RFC 3339 UTC, missing values as null."""
    if value is None or type(value).__name__ in _MISSING_TYPES:
        return None
    if isinstance(value, datetime):
        stamp = value.astimezone(UTC) if value.tzinfo is not None else value
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _column(series: pd.Series) -> list[Any]:
    """A column's values as `plain` makes them, converted a column at a time where its
    type allows (60k duplicates took 4 s value by value)."""
    import pandas as pd

    missing = series.isna().to_numpy()
    if isinstance(series.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(
        series.dtype
    ):
        stamps = series.dt.tz_convert("UTC") if isinstance(
            series.dtype, pd.DatetimeTZDtype) else series
        text = stamps.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ").tolist()
        return [None if gone else t for t, gone in zip(text, missing, strict=True)]
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype):
        if not missing.any():
            return series.tolist()
    elif pd.api.types.is_float_dtype(series.dtype):
        values = series.tolist()
        return [None if gone else v for v, gone in zip(values, missing, strict=True)]
    return [_plain_quickly(v) for v in series.tolist()]


_AS_THEY_ARE = (str, int, bool)


def _plain_quickly(value: Any) -> Any:
    """`plain`, with the commonest values (text, numbers, lists of text) passed through."""
    kind = type(value)
    if value is None or kind in _AS_THEY_ARE:
        return value
    if kind is list and all(type(v) is str for v in value):
        return value
    return plain(value)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    columns = [_column(frame[c]) for c in frame.columns]
    names = list(frame.columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def emit_json(rows: list[dict[str, Any]]) -> None:
    """Print JSON-ready rows (see `records`) as one JSON array."""
    click.echo(orjson.dumps(rows).decode())


def emit_arrow_json(table: pa.Table) -> None:
    """Print an Arrow table as `emit` prints a frame as JSON (times RFC 3339 UTC, missing
    values null), serialised by polars: hundreds of thousands of rows in a second where
    building Python objects for each took tens."""
    from queries.json_lines import json_lines

    with stdout_for_bytes() as out:
        out.write(b"[")
        held = b""  # the last block, whose last separator gives way to the array's end
        for lines in json_lines(table):
            out.write(held)
            held = lines.replace(b"\n", _SEPARATOR)
        out.write(held[: -len(_SEPARATOR)] if held else b"")
        out.write(b"]\n")


@contextlib.contextmanager
def stdout_for_bytes() -> Iterator[BinaryIO]:
    """Standard output as a binary stream, flushed after; a reader that stops reading
    (`| head`) ends the output quietly: it had what it wanted."""
    try:
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # Nothing more can be written, so the exit's own flush goes nowhere instead of
        # failing again.
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def plain_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of plain Python values (a key's timeline, say) as `records` makes a frame's."""
    return [{k: _plain_quickly(v) for k, v in row.items()} for row in rows]


#: The widest a table's cell is shown; longer text ends in "...".
CELL_WIDTH = 60


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 3] + "..."


def table_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """JSON-ready rows as an aligned text table: a header, then a line per row."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]
    lines = [columns, *cells]
    return "\n".join("  ".join(t.ljust(w) for t, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def emit_rows(rows: list[dict[str, Any]], columns: list[str], fmt: str, *,
              empty: str = "nothing found") -> None:
    """Print JSON-ready rows (`records`, `plain_rows`) as one JSON array, CSV, or an
    aligned table of `columns`."""
    if fmt == "json":
        emit_json(rows)
    elif fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        click.echo(out.getvalue(), nl=False)
    elif not rows:
        click.echo(empty)
    else:
        click.echo(table_text(rows, columns))


def emit(frame: pd.DataFrame, fmt: str, *, empty: str = "nothing found") -> None:
    """Print `frame` as one JSON array, CSV, or an aligned table."""
    if fmt == "csv" and frame.columns.empty:
        return  # nothing asked for, not even a header
    emit_rows(records(frame), [str(c) for c in frame.columns], fmt, empty=empty)
