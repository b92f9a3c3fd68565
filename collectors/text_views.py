"""Reads of a polars text column in place, natively (`_text_views.c`) where it is built.

Polars holds text as Arrow string views. The NumPy reads (`columnar._text_marks`,
`columnar._maybe_coerced`, `timestamps_vec._fixed_width`) first copy a column out as
offsets and bytes, which costs as much as the read itself; these walk the views where
they lie. Each returns None where the extension is not built, and the caller takes its
NumPy path.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

try:
    from collectors import _text_views  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the NumPy reads serve
    _text_views = None

ViewBuffers = tuple[pa.Buffer | None, pa.Buffer, tuple[pa.Buffer, ...], int, int]


def native() -> bool:
    return _text_views is not None


def view_buffers(values: pl.Series) -> ViewBuffers:
    """What the native reads take: validity, views, data buffers, offset and length."""
    array = values.to_arrow(compat_level=pl.CompatLevel.newest())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != pa.string_view():
        array = array.cast(pa.string_view())
    validity, views, *data = array.buffers()
    return validity, views, tuple(data), array.offset, len(array)


def marks(values: pl.Series) -> tuple[int, int] | None:
    """How many `"` and `:` all values of a text column hold (nulls none)."""
    if _text_views is None:
        return None
    quotes, colons = _text_views.marks(*view_buffers(values))
    return int(quotes), int(colons)


def coerced(values: pl.Series) -> np.ndarray | None:
    """Which values may be a JSON number, boolean, null, object or array that polars read
    as text (see `columnar._maybe_coerced`), as a bool array."""
    if _text_views is None:
        return None
    found = _text_views.coerced(*view_buffers(values))
    return np.frombuffer(found, dtype=np.bool_)


def rfc3339(values: pl.Series) -> np.ndarray | None:
    """µs of a text column whose every value is RFC 3339 in the fixed forms that
    `timestamps_vec._fixed_width` reads; None where one is not (or without the extension)."""
    if _text_views is None:
        return None
    stamps = _text_views.rfc3339(*view_buffers(values))
    return None if stamps is None else np.frombuffer(stamps, dtype=np.int64)
