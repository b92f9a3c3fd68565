"""Arrow values made from Python ones without pyarrow's pandas check.

`pa.array`, `pa.scalar` and `Array.to_numpy` first ask whether an argument is a pandas
object, and asking imports pandas: 0.14 s on the 2-core machine, a third of what
`dupescope timeline` takes as a new process. The key's path through the store (the
membership filter, the lookup index, the candidate rows) builds its few Arrow values
here, from buffers, and so never imports pandas. tests/test_lean_imports.py holds the
command to that.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import numpy as np
import pyarrow as pa


def strings(values: Sequence[str]) -> pa.StringArray:
    """`values` (no None among them) as an Arrow string array."""
    encoded = [v.encode() for v in values]
    offsets = np.fromiter(accumulate((len(b) for b in encoded), initial=0), dtype=np.int32,
                          count=len(encoded) + 1)
    array = pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets),
                                        pa.py_buffer(b"".join(encoded)))
    assert isinstance(array, pa.StringArray)
    return array


def string(value: str) -> pa.StringScalar:
    """`value` as an Arrow string scalar (for `pyarrow.compute` against a column)."""
    scalar = strings([value])[0]
    assert isinstance(scalar, pa.StringScalar)
    return scalar


def int64s(values: Sequence[int] | np.ndarray) -> pa.Int64Array:
    """`values` (no None among them) as an Arrow int64 array: row positions to take."""
    data = np.asarray(values, dtype=np.int64)
    array = pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])
    assert isinstance(array, pa.Int64Array)
    return array


def uint64s(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A uint64 Arrow array without nulls as a numpy array (copied once)."""
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = [np.frombuffer(chunk.buffers()[1], dtype=np.uint64, count=len(chunk),
                           offset=chunk.offset * 8) for chunk in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
