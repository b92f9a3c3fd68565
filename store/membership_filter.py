"""A membership (Bloom) filter beside a lookup index file: which values it cannot hold.

A batch's new keys and job_ids are absent from the index, but each falls inside the bounds
of some index row group, so without a filter every such group is decoded only to learn
that the value is not there: at 10M events of the benchmarks' generator, 305 row groups
and 0.86 s of a 2.5 s absorb. The filter answers "certainly absent" for about 99% of
them from one word each, so a batch of new keys decodes almost nothing.

The filter is an optimisation, never a source of truth: a value it may hold is looked up
as before, and a filter that is missing, unreadable, or was built with a hash function
that differs from this process's (another DuckDB version) is not used at all.

Layout: a `.npy` array of uint64, four header words (format, bits, probes, check) then the
filter's words (a blocked Bloom filter: a value sets `PROBES` bits of one word),
memory-mapped by readers so that a probe touches one page a value.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from store.arrow_values import numbers, strings
from store.durable import place, temporary_for

BITS_PER_VALUE = 12
PROBES = 5  # false positives about 1% at 12 bits a value, blocked in 64-bit words
FORMAT = 2
HEADER = 4
SUFFIX = ".filter"
_CHECK_VALUE = "dupescope membership filter"
_CHUNK = 1 << 20

_database: duckdb.DuckDBPyConnection | None = None
_opening = threading.Lock()


def _cursor() -> duckdb.DuckDBPyConnection:
    """A cursor of one in-memory database kept for hashing (one per process: each
    database has threads of its own), for the calling thread to use and close."""
    global _database
    with _opening:
        if _database is None:
            _database = duckdb.connect()
            _database.execute("SET threads = 1")
        return _database.cursor()


def value_hashes(values: pa.Array | pa.ChunkedArray | list[str]) -> np.ndarray:
    """DuckDB's 64-bit hash of each value, as uint64 (nulls are not expected)."""
    if isinstance(values, list):
        values = strings(values)
    table = pa.Table.from_arrays([values], names=["v"])
    with _cursor() as con:
        con.register("filter_values", table)
        hashes = con.sql("SELECT hash(v) AS h FROM filter_values").to_arrow_table()
    return numbers(hashes.column("h"), np.uint64)


@functools.cache
def _check() -> int:
    return int(value_hashes([_CHECK_VALUE])[0])


def _blocks(hashes: np.ndarray, words: int, probes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each hash's word of the filter and the `probes` bits it sets in it: a blocked Bloom
    filter, one word a value, so building and probing touch one word, not `probes`."""
    word = (hashes & np.uint64(0xFFFFFFFF)) % np.uint64(words)
    high = hashes >> np.uint64(32)
    mask = np.zeros(len(hashes), dtype=np.uint64)
    for probe in range(probes):
        mask |= np.uint64(1) << ((high >> np.uint64(6 * probe)) & np.uint64(63))
    return word, mask


def filter_name(index: Path) -> str:
    """A new, unique name for the filter of the index file `index` (in its folder)."""
    return f"{index.stem}.{uuid.uuid4().hex[:12]}{SUFFIX}"


def write_filter(path: Path, values: pa.Array | pa.ChunkedArray) -> None:
    """The filter of `values` as `path`, atomically and durably."""
    chunks = (value_hashes(values.slice(start, _CHUNK))
              for start in range(0, len(values), _CHUNK))
    write_filter_of_hashes(path, len(values), chunks)


def write_filter_of_hashes(path: Path, count: int, hashes: Iterable[np.ndarray]) -> None:
    """The filter of `count` values given as chunks of their DuckDB `hash()` (uint64), as
    `path`: a caller that has its values in a database hashes them there, a chunk at a
    time, instead of holding them all."""
    words = -(-max(count, 1) * BITS_PER_VALUE // 64)
    bits = words * 64
    array = np.zeros(HEADER + words, dtype=np.uint64)
    array[:HEADER] = [FORMAT, bits, PROBES, _check()]
    body = array[HEADER:]
    for chunk in hashes:
        word, mask = _blocks(np.asarray(chunk, dtype=np.uint64), words, PROBES)
        np.bitwise_or.at(body, word, mask)
    temporary = temporary_for(path)
    with open(temporary, "wb") as handle:
        np.save(handle, array)
    place(temporary, path)


class MembershipFilter:
    """An opened filter: `may_hold` is False only for values certainly absent."""

    def __init__(self, array: np.ndarray) -> None:
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
        word, mask = _blocks(hashes, len(self._body), self._probes)
        held: np.ndarray = (self._body[word] & mask) == mask
        return held
