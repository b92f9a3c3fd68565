"""The native reads of a text column's views (`collectors/_text_views.c`) give what their
NumPy references give: the marks of its values, and the µs of its RFC 3339 timestamps."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from collect_support import source_digest
from native_support import require_native

from collectors import columnar, text_views
from collectors.timestamps_vec import micros_column

native = require_native("_text_views")

PIECES = ['"', ":", "a", "é", "\\", "x" * 13, "0", " "]


def _text_column(rng: random.Random, rows: int) -> pl.Series:
    values = [
        None if rng.random() < 0.1
        else "".join(rng.choice(PIECES) for _ in range(rng.randrange(8)))
        for _ in range(rows)
    ]
    return pl.Series("v", values, dtype=pl.String)


def _micros_without_native(values: pl.Series, monkeypatch) -> list[int | None]:
    with monkeypatch.context() as patch:
        patch.setattr(text_views, "_text_views", None)
        return micros_column(values).to_list()


def test_the_native_reads_are_built_from_the_source_beside_them() -> None:
    assert native.SOURCE_DIGEST == source_digest(native, "_text_views.c")
    assert text_views.native()


@pytest.mark.parametrize("seed", range(20))
def test_marks_are_counted_as_the_reference_counts_them(seed: int) -> None:
    rng = random.Random(seed)
    column = _text_column(rng, rng.choice([0, 1, 7, 300]))
    # As read, sliced (an offset into the views) and gathered (views out of order).
    picks = [column, column.slice(rng.randrange(max(len(column), 1)))]
    if len(column):
        picks.append(column.gather([rng.randrange(len(column)) for _ in range(50)]))
    for values in picks:
        assert text_views.marks(values) == columnar._text_marks_reference(values)


COERCIBLE = ["1", "-0.5e+3", "0", "1E5", "true", "false", "null", "{a", "[", "-12.25"]
NOT_COERCIBLE = ["05", "0x", "truex", "", "2025-11-30", "-", "1.", "1e", "+1", " 1", "nul",
                 ".5", "1.5e", "0.0.1", "é"]


@pytest.mark.parametrize("value", COERCIBLE)
def test_text_that_may_be_coerced(value: str) -> None:
    values = pl.Series("v", [value])
    assert text_views.coerced(values).tolist() == [True]
    assert columnar._maybe_coerced_reference(values).tolist() == [True]


@pytest.mark.parametrize("value", NOT_COERCIBLE)
def test_text_that_cannot_be_coerced(value: str) -> None:
    values = pl.Series("v", [value])
    assert text_views.coerced(values).tolist() == [False]
    assert columnar._maybe_coerced_reference(values).tolist() == [False]


@pytest.mark.parametrize("seed", range(10))
def test_coercible_rows_are_found_as_the_reference_finds_them(seed: int) -> None:
    rng = random.Random(seed)
    values = pl.Series("v", [
        None if rng.random() < 0.1
        else rng.choice(COERCIBLE + NOT_COERCIBLE) + rng.choice(["", "", "0", "x"])
        for _ in range(300)
    ])
    known = np.array([rng.random() < 0.2 for _ in range(300)])
    for picked in (values, values.slice(7), values.gather(list(range(299, -1, -3)))):
        assert columnar._maybe_coerced(picked).tolist() == (
            columnar._maybe_coerced_reference(picked).tolist())
    assert columnar._maybe_coerced(values, None, known).tolist() == (
        columnar._maybe_coerced_reference(values, None, known).tolist())


STAMPS = [
    "2025-11-30T12:00:00Z",
    "2025-11-30T12:00:00.5Z",
    "2025-11-30T12:00:00.123456Z",
    "2025-11-30T12:00:00.123456789Z",
    "2025-11-30T12:00:00+02:00",
    "2025-11-30T12:00:00.25-05:30",
    "2024-02-29T23:59:59.999999+00:00",
    "1969-12-31T23:59:59.9Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
]
ODD_STAMPS = [
    "2025-11-30t12:00:00Z",  # a lower-case T
    "2025-11-30 12:00:00Z",
    "2025-11-30T12:00:60Z",  # a leap second
    "2025-02-29T12:00:00Z",  # no such day
    "0000-01-01T00:00:00Z",
    "2025-11-30T12:00:00+24:00",
    "2025-11-30T12:00:00.1234567890Z",  # ten digits
    "2025-11-30T12:00:00.Z",
    "2025-11-30T12:00:00",
    "2025-11-30T12:00:00z",
    "2025-13-01T00:00:00Z",
    "2025-11-30T12:00:00+0200",
]


@pytest.mark.parametrize("stamp", STAMPS)
def test_each_fixed_form_reads_as_the_general_parse_reads_it(stamp: str, monkeypatch) -> None:
    values = pl.Series("ts", [stamp] * 3)
    assert text_views.rfc3339(values) is not None
    assert micros_column(values).to_list() == _micros_without_native(values, monkeypatch)


@pytest.mark.parametrize("stamp", ODD_STAMPS)
def test_other_forms_are_left_to_the_general_parse(stamp: str, monkeypatch) -> None:
    values = pl.Series("ts", [STAMPS[0], stamp])
    assert text_views.rfc3339(values) is None
    assert micros_column(values).to_list() == _micros_without_native(values, monkeypatch)


def test_a_null_leaves_the_column_to_the_general_parse() -> None:
    assert text_views.rfc3339(pl.Series("ts", [STAMPS[0], None])) is None


def test_forms_mixed_within_one_width_read_as_the_general_parse(monkeypatch) -> None:
    # 27 bytes each: six digits and `Z`, or one digit and an offset.
    values = pl.Series("ts", ["2025-11-30T12:00:00.000001Z", "2025-11-30T12:00:00.5+01:00"])
    assert micros_column(values).to_list() == _micros_without_native(values, monkeypatch)


@pytest.mark.parametrize("seed", range(10))
def test_random_stamp_columns_read_alike(seed: int, monkeypatch) -> None:
    rng = random.Random(seed)
    values = pl.Series("ts", [rng.choice(STAMPS + ODD_STAMPS[:1] * (seed % 2))
                              for _ in range(200)])
    assert micros_column(values).to_list() == _micros_without_native(values, monkeypatch)


def test_a_view_outside_its_buffers_is_refused() -> None:
    validity, views, data, offset, count = text_views.view_buffers(
        pl.Series("v", ["a" * 20, "b" * 20]))
    for view in (0, 1):
        spoiled = bytearray(views.to_pybytes())
        spoiled[16 * view + 12 : 16 * view + 16] = (10**6).to_bytes(4, "little")  # its offset
        # rfc3339 stops at the first value that is no timestamp: view 0 here.
        for read in (native.marks, native.coerced, native.rfc3339)[: 3 - view]:
            with pytest.raises(ValueError, match=f"view {view} points outside"):
                read(validity, pa.py_buffer(bytes(spoiled)), data, offset, count)
    with pytest.raises(ValueError, match="shorter than the array"):
        native.marks(validity, views, data, offset, count + 1)
