"""Canonical rows -> one Arrow table, the unit every store writes in bulk."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from collectors.normalise import Row
from store.schema import EVENTS_SCHEMA

if TYPE_CHECKING:
    import polars as pl


def rows_to_table(rows: Sequence[Row]) -> pa.Table:
    """Column by column, never a row-by-row insert.

    Where polars is loaded already (ingest, its workers), polars builds the columns:
    `pa.array` of Python values imports pandas on its first call, a third of a second in
    each of ingest's workers, which otherwise never load it. Elsewhere (a collector taking
    only OTLP) pyarrow does, and polars, ~30 MB, stays unloaded. Both give the same table.
    """
    columns = {field.name: [row.get(field.name) for row in rows] for field in EVENTS_SCHEMA}
    if "polars" in sys.modules:
        return _by_polars(columns)
    return _by_pyarrow(columns)


def _by_pyarrow(columns: dict[str, list[Any]]) -> pa.Table:
    arrays = []
    for field in EVENTS_SCHEMA:
        values = columns[field.name]
        if pa.types.is_timestamp(field.type):  # integer µs
            arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def _by_polars(columns: dict[str, list[Any]]) -> pa.Table:
    import polars as pl

    return pl.DataFrame(columns, schema=_polars_schema()).to_arrow().cast(EVENTS_SCHEMA)


@functools.cache
def _polars_schema() -> dict[str, pl.DataType]:
    """The polars type each column is built in: `ts` as its integer µs."""
    import polars as pl

    def built_as(field: pa.Field) -> pl.DataType:
        if pa.types.is_int32(field.type):
            return pl.Int32()
        if pa.types.is_int64(field.type) or pa.types.is_timestamp(field.type):
            return pl.Int64()
        return pl.String()

    return {field.name: built_as(field) for field in EVENTS_SCHEMA}
