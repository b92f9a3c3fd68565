"""Arrow values built from buffers (store/arrow_values.py) equal what pyarrow builds."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.arrow_values import int64s, numbers, string, strings


def test_strings_keep_every_value_and_its_bytes() -> None:
    values = ["inv-1", "", "réglé", "字"]
    assert strings(values).equals(pa.array(values, pa.string()))
    assert strings([]).equals(pa.array([], pa.string()))


def test_a_string_scalar_compares_against_a_column() -> None:
    column = pa.array(["a", None, "b", "a"], pa.string())
    assert pc.equal(column, string("a")).to_pylist() == [True, None, False, True]


def test_row_positions_take_those_rows() -> None:
    table = pa.table({"v": ["a", "b", "c"]})
    assert table.take(int64s([2, 0])).column("v").to_pylist() == ["c", "a"]


def test_hashes_read_back_from_a_sliced_chunked_result() -> None:
    hashes = duckdb.sql("SELECT hash(unnest($v)) AS h", params={"v": ["a", "b", "c"]})
    column = hashes.to_arrow_table().column("h")
    assert numbers(column, np.uint64).tolist() == column.to_pylist()
    assert numbers(column.slice(1), np.uint64).tolist() == column.to_pylist()[1:]
