"""Canonical rows -> one Arrow table, the unit every store writes in bulk."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pyarrow as pa

from collectors.normalise import Row
from store.schema import EVENTS_SCHEMA


def _polars_type(field: pa.Field) -> pl.DataType:
    """The polars type a column of `field` is built in: `ts` as its integer µs."""
    if pa.types.is_int32(field.type):
        return pl.Int32()
    if pa.types.is_int64(field.type) or pa.types.is_timestamp(field.type):
        return pl.Int64()
    return pl.String()


_COLUMNS = {field.name: _polars_type(field) for field in EVENTS_SCHEMA}


def rows_to_table(rows: Sequence[Row]) -> pa.Table:
    """Column by column, never a row-by-row insert.

    Built by polars: `pa.array` of Python values imports pandas on its first call, a
    third of a second in each of ingest's workers, which otherwise never load it.
    """
    columns = {name: [row.get(name) for row in rows] for name in _COLUMNS}
    frame = pl.DataFrame(columns, schema=_COLUMNS)
    return frame.to_arrow().cast(EVENTS_SCHEMA)
