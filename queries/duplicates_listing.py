"""Every duplicate as the JSON `dupescope duplicates --format json` prints, kept rendered
beside each layer of an embedded store's derived state.

Printing the 2.5M duplicates of 100M events took 10-11 s, most of it reading, shaping
and serialising rows that had not changed since the last call. Each layer's rows of the
kept answer (`answer_duplicates`) are therefore rendered once, when the layer is written:

- `answer_duplicates_listing-<layer>.listing`: the rows' JSON objects, each followed by
  `,\\n`, in the answer's order (first_us, key);
- `answer_duplicates_listing-<layer>.parquet`: per row its key, first_us, and where its
  bytes lie in that file.

An unfiltered listing then reads the small index through the layers (a later layer hides
an older layer's rows of the keys it replaces, as for every layered table), puts the rows
in order, and copies byte ranges of the files to the output: a batch costs the rendering
of its own keys, and a listing costs what its bytes cost to copy. A state with a layer
that has no such files (written before they were kept, or held only in memory) is
printed the way a filtered listing is.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from derive import catalogue
from derive.embedded import state as derived_state
from derive.library import text as sql_text
from queries.duplicates_shape import shaped
from store.base import SegmentedStore
from store.durable import temporary_for

#: The kept answer the listing renders, and the name of its files.
ANSWER = "answer_duplicates"
LISTING = "answer_duplicates_listing"
#: The order of the listing: that of the kept answer.
ORDER = tuple(str(catalogue.answer("duplicates").by_key).split(", "))

#: Rows serialised at once.
_ROWS_A_BLOCK = 65_536
#: After the last row, the separator it was rendered with gives way to the array's end.
SEPARATOR = b",\n"


def json_rows(table: pa.Table) -> Iterator[bytes]:
    """`table`'s rows as JSON objects (times RFC 3339 UTC, missing values null), each
    followed by SEPARATOR, a block of rows at a time.

    Serialised by polars' JSON lines writer, twice as fast as its array writer (0.6 s
    against 1.4 s for 600k duplicates); a raw newline only ever ends a row."""
    import polars as pl

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    stamps = [name for name, kind in frame.schema.items() if isinstance(kind, pl.Datetime)]
    frame = frame.with_columns(
        pl.col(name).dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        for name in stamps
    )
    for start in range(0, frame.height, _ROWS_A_BLOCK):
        lines = io.BytesIO()
        frame.slice(start, _ROWS_A_BLOCK).write_ndjson(lines)
        yield lines.getvalue().replace(b"\n", SEPARATOR)


def listing_path(store: SegmentedStore, layer: str) -> Path:
    return derived_state.folder(store) / f"{LISTING}-{layer}.listing"


def keep_layer(store: SegmentedStore, layer: str) -> None:
    """Render layer `layer`'s rows of the kept answer into its listing files (written
    before the state naming the layer is committed, like the layer's other files)."""
    rows = _read(derived_state.rows_path(store, ANSWER, layer))
    rows = rows.sort_by([(column, "ascending") for column in ORDER])
    target = listing_path(store, layer)
    temporary = temporary_for(target)
    lengths: list[np.ndarray] = []
    with open(temporary, "wb") as out:
        for block in json_rows(shaped(rows.drop_columns(["answer_row"]))):
            out.write(block)
            ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))
            lengths.append(np.diff(ends, prepend=-1))
    derived_state.place(temporary, target)  # where a crash test may kill the process
    length = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    start = np.cumsum(length) - length
    index = pa.table({
        "key": rows["key"],
        "first_us": rows["first_us"],
        "layer": pa.array([layer] * rows.num_rows, pa.string()),
        "start": pa.array(start, pa.int64()),
        "length": pa.array(length, pa.int64()),
    })
    kept = derived_state.rows_path(store, LISTING, layer)
    pq.write_table(index, temporary_for(kept))
    derived_state.place(temporary_for(kept), kept)


def is_kept(store: SegmentedStore, state: derived_state.State) -> bool:
    """Whether every layer of `state` has its listing files."""
    return all(derived_state.rows_path(store, LISTING, layer).exists()
               and listing_path(store, layer).exists() for layer in state.layers)


def write(store: SegmentedStore, state: derived_state.State, out: BinaryIO) -> bool:
    """Print every duplicate of `state` as one JSON array from the kept listing, as
    `dupescope.output.emit_arrow_json` prints them; False (nothing written) if a layer
    has no listing files."""
    if not is_kept(store, state):
        return False
    ranges = _ranges(store, state)
    out.flush()
    target = _descriptor(out)
    last = len(ranges) - 1
    files: dict[str, int] = {}
    try:
        _put(out, target, b"[")
        for i, (layer, start, length) in enumerate(ranges):
            if layer not in files:
                files[layer] = os.open(listing_path(store, layer), os.O_RDONLY)
            count = length - len(SEPARATOR) if i == last else length
            _copy(files[layer], out, target, start, count)
        _put(out, target, b"]\n")
    finally:
        for handle in files.values():
            os.close(handle)
    return True


def _ranges(store: SegmentedStore, state: derived_state.State) -> list[tuple[str, int, int]]:
    """The byte ranges to print, in order, adjoining ones joined.

    The base layer holds nearly every row, already in order: it is read as its rows'
    first_us and byte ranges, less the rows later layers hide, and the few rows of the
    later layers are put in their places in it (by first_us, then by key among the base
    rows of the same first_us). Sorting every row's key instead took 0.7 s at 2.5M rows."""
    import duckdb

    con = duckdb.connect()
    base = state.layers[0]
    kept = _read(derived_state.rows_path(store, LISTING, base), ["first_us", "start", "length"])
    first = _integers(kept["first_us"])
    start = _integers(kept["start"])
    ends = np.append(start, start[-1] + _integers(kept["length"])[-1] if len(start) else 0)
    upper = state.layers[1:]
    hidden = later_first = later_start = later_length = np.zeros(0, dtype=np.int64)
    later_keys: list[str] = []
    later_layers: list[str] = []
    if upper:
        con.read_parquet(str(derived_state.rows_path(store, LISTING, base)),
                         file_row_number=True).create_view("listing_base")
        con.read_parquet([str(derived_state.units_path(store, ANSWER, layer))
                          for layer in upper]).create_view("listing_replaced")
        hidden = _integers(con.sql(sql_text("listing_hidden_rows", "duckdb"))
                           .to_arrow_table()["file_row_number"])
        visible = derived_state.layered_select(store, LISTING, "key", upper, units=ANSWER)
        con.sql(f"CREATE VIEW listing_later AS {visible}")
        rows = con.sql(sql_text("listing_later_rows", "duckdb")).to_arrow_table()
        later_first, later_start, later_length = (
            _integers(rows[c]) for c in ("first_us", "start", "length"))
        later_keys, later_layers = rows["key"].to_pylist(), rows["layer"].to_pylist()
    places = _places(store, base, first, later_first, later_keys)
    # The base in pieces, cut where a later row goes and around each hidden row.
    cuts = np.unique(np.concatenate([[0, len(first)], places, hidden, hidden + 1]))
    heads, tails = cuts[:-1], cuts[1:]
    shown = ~np.isin(heads, hidden) & (tails > heads)
    heads, tails = heads[shown], tails[shown]
    # In order: by place; at one place the later layers' rows (in their order) first.
    at = np.concatenate([heads, places])
    after = np.concatenate([np.ones(len(heads), np.int8), np.zeros(len(places), np.int8)])
    rank = np.concatenate([np.zeros(len(heads), np.int64), np.arange(len(places))])
    order = np.lexsort((rank, after, at))
    names = [base, *later_layers]
    files = np.concatenate([np.zeros(len(heads), np.int64), np.arange(1, len(places) + 1)])
    offsets = np.concatenate([ends[heads], later_start])
    lengths = np.concatenate([ends[tails] - ends[heads], later_length])
    return _joined([names[f] for f in files[order]], offsets[order], lengths[order])


def _integers(column: pa.ChunkedArray) -> np.ndarray:
    """A column of integers in numpy, a missing value last (as ORDER BY puts NULLs by
    default). Taken from the Arrow buffer: a chunked array's `to_numpy`, and a pyarrow
    scalar to fill with, load pandas (0.3 s of a listing)."""
    if len(column) == 0:  # (an empty array made to combine none loads pandas too)
        return np.zeros(0, dtype=np.int64)
    values = column.combine_chunks().cast(pa.int64())
    data = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        values.offset:values.offset + len(values)]
    if values.null_count == 0:
        return data
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, data, np.iinfo(np.int64).max)


def _places(store: SegmentedStore, base: str, first: np.ndarray, upper_first: np.ndarray,
            upper_keys: list[str]) -> np.ndarray:
    """For each later row (in order), the base row it goes before."""
    places = np.searchsorted(first, upper_first, side="left")
    tied = np.searchsorted(first, upper_first, side="right") > places
    if tied.any():  # base rows of the same first_us: placed among them by key
        keys = _read(derived_state.rows_path(store, LISTING, base), ["key"])["key"]
        for i in np.flatnonzero(tied):
            low = int(places[i])
            while low < len(first) and first[low] == upper_first[i] and \
                    keys[low].as_py() < upper_keys[i]:
                low += 1
            places[i] = low
    return np.asarray(places, np.int64)


def _joined(files: list[str], offsets: np.ndarray,
            lengths: np.ndarray) -> list[tuple[str, int, int]]:
    """Ranges in order, each that goes on where the one before ends in its file joined
    to it."""
    result: list[tuple[str, int, int]] = []
    for name, offset, length in zip(files, offsets.tolist(), lengths.tolist(), strict=True):
        if length == 0:
            continue
        if result and result[-1][0] == name and result[-1][1] + result[-1][2] == offset:
            result[-1] = (name, result[-1][1], result[-1][2] + length)
        else:
            result.append((name, offset, length))
    return result


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file's columns (pyarrow's read_table imports pandas: 0.3 s of a listing)."""
    return pq.ParquetFile(path).read(columns=columns)


def _descriptor(out: BinaryIO) -> int | None:
    """The file descriptor under `out`, or None (a stream in memory)."""
    try:
        return out.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _put(out: BinaryIO, target: int | None, data: bytes) -> None:
    if target is None:
        out.write(data)
        return
    view = memoryview(data)
    while view:
        view = view[os.write(target, view):]


def _copy(source: int, out: BinaryIO, target: int | None, offset: int, count: int) -> None:
    """`count` bytes of file `source` from `offset` to the output, in the kernel where it
    can (sendfile), else read and written."""
    while count > 0:
        sent = 0
        if target is not None:
            with contextlib.suppress(OSError):  # an output sendfile cannot write to
                sent = os.sendfile(target, source, offset, count)
        if sent == 0:
            chunk = os.pread(source, min(count, 1 << 24), offset)
            if not chunk:
                raise EOFError(f"a kept listing ends before byte {offset + count}")
            _put(out, target, chunk)
            sent = len(chunk)
        offset += sent
        count -= sent
