"""A membership (Bloom) filter beside a lookup index file: which values it cannot hold.

A batch's new keys and job_ids are absent from the index, but each falls inside the bounds
of some index row group, so without a filter every such group is decoded only to learn
that the value is not there: at 10M events of the benchmarks' generator, 305 row groups
and 0.86 s of a 2.5 s absorb. The filter answers "certainly absent" for all but a fraction
of a percent of them from a few bits each, so a batch of new keys decodes almost nothing.

The filter is an optimisation, never a source of truth: a value it may hold is looked up
as before, and a filter that is missing, unreadable, or was built with a hash function
that differs from this process's (another DuckDB version) is not used at all.

Layout: a `.npy` array of uint64, four header words (format, bits, probes, check) then the
bit words, memory-mapped by readers so that a probe touches only the pages of its bits.
"""

from __future__ import annotations

import functools
import threading
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from store.durable import place, temporary_for

BITS_PER_VALUE = 12
PROBES = 5  # false positives about 0.5% at 12 bits a value
FORMAT = 1
HEADER = 4
SUFFIX = ".filter"
_CHECK_VALUE = "dupescope membership filter"
_CHUNK = 1 << 20

_local = threading.local()


def _connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection of this thread's own, for hashing."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect()
    return con


def value_hashes(values: pa.Array | pa.ChunkedArray | list[str]) -> np.ndarray:
    """DuckDB's 64-bit hash of each value, as uint64 (nulls are not expected)."""
    if isinstance(values, list):
        values = pa.array(values, pa.string())
    table = pa.table({"v": values})
    con = _connection()
    con.register("filter_values", table)
    try:
        hashes = con.execute("SELECT hash(v) AS h FROM filter_values").fetchnumpy()["h"]
    finally:
        con.unregister("filter_values")
    return np.asarray(hashes, dtype=np.uint64)


@functools.cache
def _check() -> int:
    return int(value_hashes([_CHECK_VALUE])[0])


def _positions(hashes: np.ndarray, probe: int, bits: int) -> np.ndarray:
    """Double hashing: the probe-th bit of each hash, in [0, bits)."""
    low = hashes & np.uint64(0xFFFFFFFF)
    high = (hashes >> np.uint64(32)) | np.uint64(1)
    return (low + np.uint64(probe) * high) % np.uint64(bits)


def filter_name(index: Path) -> str:
    """A new, unique name for the filter of the index file `index` (in its folder)."""
    return f"{index.stem}.{uuid.uuid4().hex[:12]}{SUFFIX}"


def write_filter(path: Path, values: pa.Array | pa.ChunkedArray) -> None:
    """The filter of `values` as `path`, atomically and durably."""
    n = max(len(values), 1)
    words = -(-n * BITS_PER_VALUE // 64)
    bits = words * 64
    array = np.zeros(HEADER + words, dtype=np.uint64)
    array[:HEADER] = [FORMAT, bits, PROBES, _check()]
    body = array[HEADER:]
    for start in range(0, len(values), _CHUNK):
        hashes = value_hashes(values.slice(start, _CHUNK))
        for probe in range(PROBES):
            position = _positions(hashes, probe, bits)
            np.bitwise_or.at(body, position >> np.uint64(6),
                             np.uint64(1) << (position & np.uint64(63)))
    temporary = temporary_for(path)
    with open(temporary, "wb") as handle:
        np.save(handle, array)
    place(temporary, path)


class MembershipFilter:
    """An opened filter: `may_hold` is False only for values certainly absent."""

    def __init__(self, array: np.ndarray) -> None:
        self._bits = int(array[1])
        self._probes = int(array[2])
        self._body = array[HEADER:]

    @classmethod
    def open(cls, path: Path) -> MembershipFilter | None:
        """The filter at `path`, or None when it cannot be used (see the module's doc)."""
        try:
            array = np.load(path, mmap_mode="r")
        except (OSError, ValueError):
            return None
        if (
            array.dtype != np.uint64
            or array.ndim != 1
            or len(array) <= HEADER
            or int(array[0]) != FORMAT
            or int(array[1]) != (len(array) - HEADER) * 64
            or int(array[3]) != _check()
        ):
            return None
        return cls(array)

    def may_hold(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash (from `value_hashes`), whether the indexed values may include it."""
        held = np.ones(len(hashes), dtype=bool)
        for probe in range(self._probes):
            position = _positions(hashes, probe, self._bits)
            word = self._body[position >> np.uint64(6)]
            held &= (word >> (position & np.uint64(63))) & np.uint64(1) == np.uint64(1)
        return held
