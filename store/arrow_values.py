"""Arrow values made from Python ones without pyarrow's pandas check.

`pa.array`, `pa.scalar` and `Array.to_numpy` first ask whether an argument is a pandas
object, and asking imports pandas: 0.14 s on the 2-core machine, a third of what
`dupescope timeline` takes as a new process. The key's path through the store (the
membership filter, the lookup index, the candidate rows), the embedded deriver's absorb
of a batch, and ingest's workers (which write segments) build their Arrow values and
read their numbers here, from buffers, and so never import pandas.
tests/test_lean_imports.py holds the commands to that.
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


def bools(values: np.ndarray) -> pa.BooleanArray:
    """NumPy booleans as an Arrow array (a filter's mask), their bits packed here."""
    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    array = pa.Array.from_buffers(pa.bool_(), len(values), [None, bits])
    assert isinstance(array, pa.BooleanArray)
    return array


def numbers(array: pa.Array | pa.ChunkedArray, dtype: type[np.generic]) -> np.ndarray:
    """A numeric (or timestamp) Arrow array without nulls as numpy `dtype` values, read
    from its buffers after a cast to that type (copied once)."""
    target = pa.from_numpy_dtype(dtype)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = [np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk),
                           offset=chunk.offset * chunk.type.byte_width)
             for chunk in (c.cast(target) for c in chunks) if len(chunk)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
