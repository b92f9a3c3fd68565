"""Every duplicate as `dupescope duplicates --format json` prints it, kept rendered beside
each layer of an embedded store's derived state.

Printing the 2.5M duplicates of 100M events took 10-11 s, most of it reading, shaping
and serialising rows that had not changed since the last call. Each layer's rows of the
kept answer (`answer_duplicates`) are therefore rendered once, when the layer is written:

- `answer_duplicates_listing-<layer>.listing`: the rows' JSON objects, each followed by
  `,\\n`, in the answer's order (first_us, key);
- `answer_duplicates_listing-<layer>.parquet`: per row its key, first_us, and where its
  bytes lie in that file.

An unfiltered listing then reads the small index through the layers (a later layer hides
an older layer's rows of the keys it replaces, as for every layered table), puts the rows
in order (derive/ordered.py), and copies byte ranges of the files to the output: a batch
costs the rendering of its own keys, and a listing costs what its bytes cost to copy. A
state with a layer that has no such files (written before they were kept, or held only
in memory) is printed the way a filtered listing is.

How a row is rendered is the caller's (`RenderRows`: the rows shaped as the command
prints them, as JSON lines); this module keeps the rendering by layer and frames it as
one JSON array.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from derive import ordered
from derive.base import RenderRows
from derive.embedded import state as derived_state
from derive.library import render as render_sql
from derive.library import text as sql_text
from store import arrow_values
from store.base import SegmentedStore
from store.durable import temporary_for

#: The kept answer the listing renders, and the name of its files.
ANSWER = "answer_duplicates"
LISTING = "answer_duplicates_listing"
#: A layer's listing index: per row its key, first_us, and where its bytes lie.
INDEX_SCHEMA = pa.schema([("key", pa.string()), ("first_us", pa.int64()),
                          ("layer", pa.string()), ("start", pa.int64()),
                          ("length", pa.int64())])

#: Rows rendered at once when a layer's listing is kept (a bound on the memory it takes).
RENDERED_A_SLICE = 32_768
#: After the last row, the separator it was rendered with gives way to the array's end.
SEPARATOR = b",\n"


def listing_path(store: SegmentedStore, layer: str) -> Path:
    return derived_state.folder(store) / f"{LISTING}-{layer}.listing"


def keep_layer(store: SegmentedStore, layer: str, render: RenderRows) -> None:
    """Render layer `layer`'s rows of the kept answer into its listing files (written
    before the state naming the layer is committed, like the layer's other files).

    The rows come sorted from the store's DuckDB connection and are rendered a batch at
    a time: held and rendered whole, the 2.5M duplicates of 100M events took the build
    past its memory budget on top of DuckDB's share."""
    target = listing_path(store, layer)
    kept = derived_state.rows_path(store, LISTING, layer)
    listed, indexed = temporary_for(target), temporary_for(kept)
    offset = 0
    with open(listed, "wb") as out, pq.ParquetWriter(indexed, INDEX_SCHEMA) as index:
        for batch in _in_order(store, derived_state.rows_path(store, ANSWER, layer)):
            rows = pa.Table.from_batches([batch])
            lengths = [np.zeros(0, dtype=np.int64)]
            for lines in render(rows):
                block = lines.replace(b"\n", SEPARATOR)
                out.write(block)
                ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))
                lengths.append(np.diff(ends, prepend=-1))
            length = np.concatenate(lengths)
            index.write_table(pa.table({
                "key": rows["key"].cast(pa.string()),
                "first_us": rows["first_us"].cast(pa.int64()),
                "layer": pa.repeat(arrow_values.string(layer), rows.num_rows),
                "start": arrow_values.int64s(offset + np.cumsum(length) - length),
                "length": arrow_values.int64s(length),
            }, schema=INDEX_SCHEMA))
            offset += int(length.sum())
    derived_state.place(listed, target)  # where a crash test may kill the process
    derived_state.place(indexed, kept)


def _in_order(store: SegmentedStore, path: Path) -> Iterator[pa.RecordBatch]:
    """The rows of a layer's answer file in the listing's order, RENDERED_A_SLICE at a
    time."""
    params = {"path": str(path)}
    sql = render_sql(sql_text("listing_rows_in_order", "duckdb"), "duckdb", params)
    relation = store.connection(events=False).sql(sql, params=params)
    yield from relation.to_arrow_reader(RENDERED_A_SLICE)


def is_kept(store: SegmentedStore, state: derived_state.State) -> bool:
    """Whether every layer of `state` has its listing files."""
    return all(derived_state.rows_path(store, LISTING, layer).exists()
               and listing_path(store, layer).exists() for layer in state.layers)


def write(store: SegmentedStore, state: derived_state.State, out: BinaryIO) -> bool:
    """Print every duplicate of `state` as one JSON array from the kept listing, as the
    command prints rendered rows; False (nothing written) if a layer has no listing
    files."""
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
    later layers are put in their places in it (derive/ordered.py). Sorting every row's
    key instead took 0.7 s at 2.5M rows."""
    base = state.layers[0]
    index = derived_state.rows_path(store, LISTING, base)
    kept = _read(index, ["first_us", "start", "length"])
    first = ordered.firsts(kept["first_us"])
    start = ordered.firsts(kept["start"])
    n = len(first)
    ends = np.append(start, start[-1] + ordered.firsts(kept["length"])[-1] if n else 0)
    hidden, later = _later(store, state)
    shown = np.delete(np.arange(n), hidden)
    keys: list[pa.ChunkedArray] = []

    def kept_keys(lo: int, hi: int) -> list[str]:
        if not keys:  # read only where firsts tie
            keys.append(_read(index, ["key"])["key"])
        return [keys[0][i].as_py() for i in shown[lo:hi].tolist()]

    at = ordered.places(first[shown], later.first, later.keys, kept_keys)
    order = ordered.merged(shown, at, n + np.arange(len(later.keys)))
    heads, tails = ordered.runs(order, seam=n)
    # A run of base rows is one range of its file; a run of later rows, a range a row.
    count = np.where(heads >= n, tails - heads, 1)
    row = np.repeat(heads, count) + (np.arange(int(count.sum()))
                                     - np.repeat(np.cumsum(count) - count, count))
    tail = np.repeat(tails, count)
    mine = row < n
    offsets = np.empty(len(row), dtype=np.int64)
    lengths = np.empty(len(row), dtype=np.int64)
    offsets[mine] = ends[row[mine]]
    lengths[mine] = ends[tail[mine]] - ends[row[mine]]
    offsets[~mine] = later.start[row[~mine] - n]
    lengths[~mine] = later.length[row[~mine] - n]
    names = [base, *later.layers]
    files = np.where(mine, 0, row - n + 1)
    return _joined([names[f] for f in files.tolist()], offsets, lengths)


@dataclass(frozen=True)
class _Later:
    """The later layers' rows still shown, in the listing's order, and where each lies."""

    first: np.ndarray
    keys: list[str]
    layers: list[str]
    start: np.ndarray
    length: np.ndarray


def _later(store: SegmentedStore, state: derived_state.State) -> tuple[np.ndarray, _Later]:
    """The base rows (by place in its index) that later layers hide, and the later
    layers' rows still shown."""
    import duckdb

    base, upper = state.layers[0], state.layers[1:]
    none = np.zeros(0, dtype=np.int64)
    if not upper:
        return none, _Later(none, [], [], none, none)
    con = duckdb.connect()
    con.read_parquet(str(derived_state.rows_path(store, LISTING, base)),
                     file_row_number=True).create_view("listing_base")
    con.read_parquet([str(derived_state.units_path(store, ANSWER, layer))
                      for layer in upper]).create_view("listing_replaced")
    hidden = ordered.firsts(con.sql(sql_text("listing_hidden_rows", "duckdb"))
                            .to_arrow_table()["file_row_number"])
    visible = derived_state.layered_select(store, LISTING, "key", upper, units=ANSWER)
    con.sql(f"CREATE VIEW listing_later AS {visible}")
    rows = con.sql(sql_text("listing_later_rows", "duckdb")).to_arrow_table()
    return hidden, _Later(ordered.firsts(rows["first_us"]), rows["key"].to_pylist(),
                          rows["layer"].to_pylist(), ordered.firsts(rows["start"]),
                          ordered.firsts(rows["length"]))


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
