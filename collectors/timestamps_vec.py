"""Timestamps a column at a time: the rules of `timestamps.py` as polars expressions.

Each function returns integer microseconds, or null where the value is not in a form this
module is sure to read exactly as `to_micros` would; the caller sends those rows to the
per-record path, which parses them or rejects them with its own message.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from collectors import text_views
from store.contract import EPOCH_MICROS_BELOW, EPOCH_MILLIS_BELOW, EPOCH_SECONDS_BELOW

# The forms read here: RFC 3339 with `T` or a space, an optional fraction of up to nine
# digits (truncated to µs, as `datetime.fromisoformat` does) and `Z`, an offset or none.
RFC3339 = (
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?"
    r"(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?$"
)
DIGITS = r"^\d{1,19}$"  # beyond int64 the cast gives null: the row path decides
DECIMAL = r"^\d+\.\d+$"
#: Epoch numbers as text that `to_micros` reads as the numbers they spell.
NUMBER_TEXT = r"^(\d{1,19}|\d+\.\d+)$"
_EXACT_FLOAT = 2.0**53  # beyond this a float no longer holds every integer exactly


def epoch_int(value: pl.Expr) -> pl.Expr:
    """Integer epoch, unit by magnitude (seconds below 1e11, ms below 1e14, µs below 1e17)."""
    size = value.abs()
    return (
        pl.when(size < int(EPOCH_SECONDS_BELOW))
        .then(value * 1_000_000)
        .when(size < int(EPOCH_MILLIS_BELOW))
        .then(value * 1_000)
        .when(size < int(EPOCH_MICROS_BELOW))
        .then(value)
        .otherwise(value // 1_000)
    )


def epoch_float(value: pl.Expr) -> pl.Expr:
    """Float epoch, rounded half to even like Python's `round`; null where inexact."""
    size = value.abs()
    return (
        pl.when(size >= _EXACT_FLOAT)
        .then(None)
        .when(size < EPOCH_SECONDS_BELOW)
        .then((value * 1e6).round(0).cast(pl.Int64))
        .when(size < EPOCH_MILLIS_BELOW)
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
    """A timestamp given as text: RFC 3339, or an epoch written as digits (with a fraction:
    `float` of the text, as `to_micros` takes it)."""
    return (
        pl.when(text.str.contains(DIGITS))
        .then(epoch_int(text.cast(pl.Int64, strict=False)))
        .when(text.str.contains(DECIMAL))
        .then(epoch_float(text.cast(pl.Float64, strict=False)))
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


_DATE_DIGITS = (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)
_DATE_MARKS = ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"))
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _number(digits: np.ndarray) -> np.ndarray:
    """The integers written by the columns of digits (ASCII, already checked) of a matrix."""
    value = digits[:, 0].astype(np.int64) - 48
    for column in digits.T[1:]:
        value = value * 10 + column - 48  # uint8 column, promoted to int64 by `value`
    return value


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    year = year - (month <= 2)
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return era * 146_097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719_468


def _fixed_width(values: pl.Series) -> pl.Series | None:
    """`micros` of a text column written in a few fixed-width RFC 3339 forms, or None.

    A log writes its timestamps alike (`T`, a fraction of a fixed number of digits or none,
    `Z` or an offset), so the values of one width line up as a matrix of bytes and each
    field is read from its columns with integer arithmetic: about a tenth of chrono's parse.
    Only when every value passes the checks that `_rfc3339_common` makes (the form, a real
    date, a time of day below second 60, a year above 0) is the column read here, so its
    result is `_rfc3339_common`'s; otherwise None leaves the column to the general path.
    """
    if not len(values) or values.null_count():
        return None
    if text_views.native():
        # Each value is read in its own form: a column whose widths mix forms is read
        # here too, where the matrices below leave it to `_rfc3339_common`, which gives
        # the same µs.
        stamps = text_views.rfc3339(values)
        return None if stamps is None else pl.Series(values.name, stamps)
    return _fixed_width_reference(values)


def _fixed_width_reference(values: pl.Series) -> pl.Series | None:
    """`_fixed_width` with NumPy, one byte matrix per width."""
    array = values.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset :][: len(array) + 1]
    text = np.frombuffer(array.buffers()[2], np.uint8)
    lengths = np.diff(offsets)
    shortest, longest = int(lengths.min()), int(lengths.max())
    if shortest < 20 or longest > 36:
        return None
    stamps = np.empty(len(array), dtype=np.int64)
    if shortest == longest:
        rows = text[offsets[0] : offsets[-1]].reshape(len(array), shortest)
        read = _read_form(rows)
        if read is None:
            return None
        stamps[:] = read
    else:
        counts = np.bincount(lengths - shortest)
        for width in (np.flatnonzero(counts) + shortest).tolist():
            which = np.flatnonzero(lengths == width)
            # Every `width` bytes from each position, as a view: rows are then gathered by
            # their start alone.
            windows = np.lib.stride_tricks.as_strided(
                text, shape=(len(text) - width + 1, width), strides=(1, 1), writeable=False
            )
            rows = windows[offsets[which]]
            read = _read_form(rows)
            if read is None:
                return None
            stamps[which] = read
    return pl.Series(values.name, stamps)  # int64 already: no dtype, so no copy


def _read_form(text: np.ndarray) -> np.ndarray | None:
    """µs of the timestamps in the rows of a byte matrix, all in its first row's form."""
    width = text.shape[1]
    first = bytes(text[0])
    zone = 1 if first.endswith(b"Z") else 6
    fraction = width - 19 - zone - 1  # digits after the point, when there is one
    if zone == 6 and first[-6:-5] not in (b"+", b"-"):
        return None
    if fraction >= 0 and (first[19:20] != b"." or not 1 <= fraction <= 9):
        return None
    if fraction < 0 and width != 19 + zone:
        return None
    digits = list(_DATE_DIGITS) + [20 + i for i in range(max(fraction, 0))]
    marks = list(_DATE_MARKS) + ([(19, ".")] if fraction > 0 else [])
    if zone == 1:
        marks.append((width - 1, "Z"))
    else:
        digits += [width - 5, width - 4, width - 2, width - 1]
        marks.append((width - 3, ":"))
    ok = np.all((text[:, digits] - 48) <= 9, axis=1)  # unsigned: bytes below "0" wrap
    for at, mark in marks:
        ok &= text[:, at] == ord(mark)
    if zone == 6:
        ok &= (text[:, width - 6] == ord("+")) | (text[:, width - 6] == ord("-"))
    if not ok.all():
        return None
    year, month, day = _number(text[:, 0:4]), _number(text[:, 5:7]), _number(text[:, 8:10])
    hour, minute, second = _number(text[:, 11:13]), _number(text[:, 14:16]), _number(text[:, 17:19])
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & leap)
    ok = (year > 0) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days)
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
    seconds = _days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
    if zone == 6:
        zone_hour, zone_minute = _number(text[:, width - 5 : width - 3]), _number(text[:, -2:])
        ok &= (zone_hour <= 23) & (zone_minute <= 59)
        sign = np.where(text[:, width - 6] == ord("-"), -1, 1)
        seconds -= sign * (zone_hour * 3_600 + zone_minute * 60)
    if not ok.all():
        return None
    stamps = seconds * 1_000_000
    if fraction > 0:  # truncated to µs, as chrono and `datetime.fromisoformat` do
        kept = min(fraction, 6)
        stamps += _number(text[:, 20 : 20 + kept]) * 10 ** (6 - kept)
    return stamps


def number_text(values: pl.Series) -> pl.Series:
    """Which values of a text column are epochs written as digits (`NUMBER_TEXT`)."""
    return values.str.contains(NUMBER_TEXT).fill_null(False)


def micros_column(values: pl.Series, number: pl.Series | None = None) -> pl.Series:
    """`micros` of a whole column, parsing each value once where all share the common form.

    `rfc3339` tries four formats on every row; a log writes one form throughout, so the
    values are first read as one fixed-width form, then the first format alone is tried
    before the rest, whose rows then get `micros` in full. `number`, where the caller has
    it already, is `number_text(values)`.
    """
    frame = values.to_frame("v")
    if values.dtype != pl.String:
        return frame.select(micros(pl.col("v"), values.dtype)).to_series()
    if number is None:
        number = number_text(values)
    if number.any():
        # Epochs read as text beside RFC 3339 ones: each kind read by its own rule (a
        # `when` would parse every row every way), then put back together. Among epochs,
        # those without a point are DIGITS, the others DECIMAL; each cast sees only its
        # own rows (the others null).
        value = pl.col("v")
        whole = pl.col("whole")
        pointless = ~value.str.contains(".", literal=True)
        epochs = (
            frame.with_columns(number.alias("number"))
            .with_columns((pl.col("number") & pointless).alias("whole"))
            .select(
                pl.when(whole)
                .then(epoch_int(pl.when(whole).then(value).cast(pl.Int64, strict=False)))
                .when(pl.col("number"))
                .then(epoch_float(pl.when(~whole).then(value).cast(pl.Float64, strict=False)))
            )
            .to_series()
        )
        if number.all():
            return epochs.alias(values.name)
        text = micros_column(
            pl.select(pl.when(~number).then(values)).to_series(),
            pl.Series(np.zeros(len(values), dtype=bool)),
        )
        return epochs.zip_with(number, text).alias(values.name)
    fixed = _fixed_width(values.drop_nulls() if values.has_nulls() else values)
    if fixed is not None and values.has_nulls():  # a field other spellings fill in some rows
        present = values.is_not_null().to_numpy()
        stamps = np.zeros(len(values), dtype=np.int64)
        stamps[present] = fixed.to_numpy()
        fixed = pl.Series(values.name, stamps).set(pl.Series(~present), None)
    if fixed is not None:
        return fixed
    quick = frame.select(_rfc3339_common(pl.col("v"))).to_series()
    if quick.null_count() == values.null_count():
        return quick
    return frame.select(micros(pl.col("v"), values.dtype)).to_series()
