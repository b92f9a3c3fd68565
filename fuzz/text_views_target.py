"""Differential fuzz target: the native reads of a text column's views (_text_views.c)
against their NumPy references.

Each input is read as a column of text values (nulls among them, timestamps in and near
the RFC 3339 forms the native read takes, and free text), taken as polars holds it, or
sliced, or gathered out of order. Its marks must equal `columnar._text_marks_reference`,
the values it finds coercible `columnar._maybe_coerced_reference`; where the native read
gives timestamps they must equal the general parse's, and where it gives none, so must
`timestamps_vec._fixed_width_reference`. Then raw view buffers built
from the input (lengths, buffer indices and offsets anywhere) must read or be refused
with ValueError. Any sanitizer report is a finding too.

Run by fuzz/run.sh; `fuzz/replay.sh text_views FILE...` replays inputs (docs/fuzzing.md).
"""

from __future__ import annotations

import sys

import atheris
import native
import polars as pl
import pyarrow as pa

views_module = native.load("_text_views")

with atheris.instrument_imports(include=["collectors"]):
    from collectors import columnar, text_views, timestamps_vec

STAMPS = [
    "2025-11-30T12:00:00Z", "2025-11-30T12:00:00.123456Z", "2024-02-29T23:59:59.5+05:30",
    "0001-01-01T00:00:00.123456789-00:00", "2025-11-30T12:00:60Z", "2025-02-29T00:00:00Z",
]


NEAR_JSON = ["-", "0", "1", "9", ".", "e", "E", "+", "true", "false", "null", "{", "[", "x", " "]


def consume_value(data: atheris.FuzzedDataProvider) -> str | None:
    kind = data.ConsumeIntInRange(0, 5)
    if kind == 0:
        return None
    if kind <= 3:  # a timestamp with one byte changed, or as it is
        stamp = bytearray(STAMPS[data.ConsumeIntInRange(0, len(STAMPS) - 1)].encode())
        if kind > 1:
            stamp[data.ConsumeIntInRange(0, len(stamp) - 1)] = data.ConsumeIntInRange(32, 126)
        return stamp.decode()
    if kind == 4:  # numbers, words and brackets, near and far from JSON's grammar
        return "".join(NEAR_JSON[data.ConsumeIntInRange(0, len(NEAR_JSON) - 1)]
                       for _ in range(data.ConsumeIntInRange(0, 6)))
    return data.ConsumeUnicodeNoSurrogates(data.ConsumeIntInRange(0, 30))


def general_micros(values: pl.Series) -> list[int | None]:
    saved, text_views._text_views = text_views._text_views, None
    try:
        return timestamps_vec.micros_column(values).to_list()
    finally:
        text_views._text_views = saved


def check_column(values: pl.Series) -> None:
    got, want = text_views.marks(values), columnar._text_marks_reference(values)
    if got != want:
        raise AssertionError(f"marks of {values.to_list()}: native {got}, reference {want}")
    coerced = text_views.coerced(values).tolist()
    if coerced != columnar._maybe_coerced_reference(values).tolist():
        raise AssertionError(f"coerced of {values.to_list()}: native {coerced}")
    stamps = text_views.rfc3339(values)
    if stamps is None:
        if values.null_count() == 0 and len(values):
            reference = timestamps_vec._fixed_width_reference(values)
            if reference is not None:
                raise AssertionError(f"native refused what the reference read: {values}")
        return
    general = general_micros(values)
    if stamps.tolist() != general:
        raise AssertionError(f"µs of {values.to_list()}: native {stamps}, general {general}")


def check_raw(data: atheris.FuzzedDataProvider) -> None:
    count = data.ConsumeIntInRange(0, 8)
    views = data.ConsumeBytes(data.ConsumeIntInRange(0, 16 * count + 16))
    buffers = tuple(pa.py_buffer(data.ConsumeBytes(data.ConsumeIntInRange(0, 40)))
                    for _ in range(data.ConsumeIntInRange(0, 2)))
    validity = pa.py_buffer(data.ConsumeBytes(2)) if data.ConsumeBool() else None
    offset = data.ConsumeIntInRange(0, 3)
    for read in (views_module.marks, views_module.coerced, views_module.rfc3339):
        try:
            read(validity, pa.py_buffer(views), buffers, offset, count)
        except ValueError:
            pass


def test_one_input(raw: bytes) -> None:
    data = atheris.FuzzedDataProvider(raw)
    values = pl.Series("ts", [consume_value(data) for _ in range(data.ConsumeIntInRange(0, 12))],
                       dtype=pl.String)
    check_column(values)
    if len(values):
        check_column(values.slice(data.ConsumeIntInRange(0, len(values) - 1)))
        picks = [data.ConsumeIntInRange(0, len(values) - 1) for _ in range(len(values))]
        check_column(values.gather(picks))
    check_raw(data)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
