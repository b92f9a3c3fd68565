"""Timestamps a column at a time: the rules of `timestamps.py` as polars expressions.

Each function returns integer microseconds, or null where the value is not in a form this
module is sure to read exactly as `to_micros` would; the caller sends those rows to the
per-record path, which parses them or rejects them with its own message.
"""

from __future__ import annotations

import polars as pl

# The forms read here: RFC 3339 with `T` or a space, an optional fraction of up to nine
# digits (truncated to µs, as `datetime.fromisoformat` does) and `Z`, an offset or none.
RFC3339 = (
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?"
    r"(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?$"
)
DIGITS = r"^\d{1,18}$"
_EXACT_FLOAT = 2.0**53  # beyond this a float no longer holds every integer exactly


def epoch_int(value: pl.Expr) -> pl.Expr:
    """Integer epoch, unit by magnitude (seconds below 1e11, ms below 1e14, µs below 1e17)."""
    size = value.abs()
    return (
        pl.when(size < 100_000_000_000)
        .then(value * 1_000_000)
        .when(size < 100_000_000_000_000)
        .then(value * 1_000)
        .when(size < 100_000_000_000_000_000)
        .then(value)
        .otherwise(value // 1_000)
    )


def epoch_float(value: pl.Expr) -> pl.Expr:
    """Float epoch, rounded half to even like Python's `round`; null where inexact."""
    size = value.abs()
    return (
        pl.when(size >= _EXACT_FLOAT)
        .then(None)
        .when(size < 1e11)
        .then((value * 1e6).round(0).cast(pl.Int64))
        .when(size < 1e14)
        .then((value * 1e3).round(0).cast(pl.Int64))
        .otherwise(value.cast(pl.Int64))
    )


def rfc3339(text: pl.Expr) -> pl.Expr:
    """RFC 3339 text -> µs since the epoch, UTC; null unless the form is one of `RFC3339`.

    chrono (through polars) validates the date and truncates the fraction to µs, as
    `datetime.fromisoformat` does; it would also roll a leap second over, which Python
    refuses, so second 60 (and year 0) are left to the row path.
    """
    plain = text.str.contains(RFC3339) & (text.str.slice(17, 2) != "60")
    plain = plain & (text.str.slice(0, 4) != "0000")
    parsed = [
        text.str.to_datetime(format=f"%Y-%m-%d{sep}%H:%M:%S%.f{zone}", time_unit="us", strict=False)
        for sep in ("T", " ")
        for zone in ("%#z", "")
    ]
    stamp = pl.coalesce(
        [p.dt.replace_time_zone(None) if i % 2 == 0 else p for i, p in enumerate(parsed)]
    )
    return pl.when(plain).then(stamp.dt.epoch("us"))


def from_text(text: pl.Expr) -> pl.Expr:
    """A timestamp given as text: RFC 3339, or an epoch written as digits."""
    return (
        pl.when(text.str.contains(DIGITS))
        .then(epoch_int(text.cast(pl.Int64, strict=False)))
        .otherwise(rfc3339(text))
    )


def micros(value: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """µs since the epoch for a column of `dtype`; null where the row path must decide."""
    if dtype == pl.String:
        return from_text(value)
    if dtype == pl.Int64:
        return epoch_int(value)
    if dtype == pl.Float64:
        return epoch_float(value)
    return pl.lit(None, dtype=pl.Int64)


def _rfc3339_common(text: pl.Expr) -> pl.Expr:
    """`rfc3339` for the form it tries first (`T`, then `Z` or an offset); null otherwise."""
    plain = text.str.contains(RFC3339) & (text.str.slice(17, 2) != "60")
    plain = plain & (text.str.slice(0, 4) != "0000")
    stamp = text.str.to_datetime(
        format="%Y-%m-%dT%H:%M:%S%.f%#z", time_unit="us", strict=False
    ).dt.replace_time_zone(None)
    return pl.when(plain).then(stamp.dt.epoch("us"))


def micros_column(values: pl.Series) -> pl.Series:
    """`micros` of a whole column, parsing each value once where all share the common form.

    `rfc3339` tries four formats on every row; a log writes one form throughout, so the
    first format alone is tried before the rest, whose rows then get `micros` in full.
    """
    frame = values.to_frame("v")
    if values.dtype != pl.String:
        return frame.select(micros(pl.col("v"), values.dtype)).to_series()
    quick = frame.select(_rfc3339_common(pl.col("v"))).to_series()
    if quick.null_count() == values.null_count():
        return quick
    return frame.select(micros(pl.col("v"), values.dtype)).to_series()
