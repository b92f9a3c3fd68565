"""Canonical rows -> one Arrow table, the unit every store writes in bulk."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from collectors.normalise import Row
from store.schema import EVENTS_SCHEMA


def rows_to_table(rows: Sequence[Row]) -> pa.Table:
    """Column by column: one `pa.array` per field, never a row-by-row insert."""
    columns = []
    for schema_field in EVENTS_SCHEMA:
        name = schema_field.name
        values = [row.get(name) for row in rows]
        if name == "ts":
            array = pa.array(values, type=pa.int64()).cast(schema_field.type)
        else:
            array = pa.array(values, type=schema_field.type)
        columns.append(array)
    return pa.Table.from_arrays(columns, schema=EVENTS_SCHEMA)
