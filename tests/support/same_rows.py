"""Two event tables compared row for row: what the ingest paths are held to."""

from __future__ import annotations

import orjson
import pyarrow as pa


def same_rows(got: pa.Table, want: pa.Table) -> None:
    """Equal column by column; `attrs` as the JSON objects they spell."""
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        left, right = got[name].to_pylist(), want[name].to_pylist()
        if name == "attrs":
            left = [orjson.loads(v) if v is not None else None for v in left]
            right = [orjson.loads(v) if v is not None else None for v in right]
        assert left == right, name
