"""One block of lines (tens of MB) -> canonical rows: column-wise where exact, else per line.

The per-line path (`decode_lines`, `decode_otlp_lines`) is the reference. A block's lines
are found once, as offsets into its bytes (a line is copied out only to go line by line);
lines that the column-wise path (`columnar.py`) can read exactly go to it in one polars
read, and only the others (explicit nulls, arrays, odd bytes, OTLP, lines polars refused or
rows it may have coerced) go line by line. So a bad line is still reported with its
file:line and reason, and a good block costs a few column operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import polars as pl
import pyarrow as pa

from collectors.arrow_batch import rows_to_table
from collectors.columnar import ColumnarNormaliser, DecodeFailed, LineMarks
from collectors.jsonlines import Rejected, decode_lines
from collectors.mapping import FieldMapping
from collectors.normalise import MAX_DEPTH, Normaliser
from collectors.otlp_lines import decode_otlp_lines, is_otlp_line
from collectors.uids import column_uids, line_uids
from store.schema import EVENTS_SCHEMA, VIEW_SCHEMA, empty_table

# Explicit nulls, arrays, empty objects, repeated keys and values polars coerced are all
# caught after the read (they change a row's `"` count, its types or its shape). What is
# left to find before it: high surrogate escapes without their low half, which orjson
# refuses and polars does not, and control bytes, which orjson refuses inside strings.
_RESOURCE = np.frombuffer(b"resource", dtype=np.uint8)
_WHITESPACE = np.frombuffer(b" \t\r\x0b\x0c", dtype=np.uint8)
_HIGH_SURROGATE = np.frombuffer(b"89abAB", dtype=np.uint8)
_LOW_SURROGATE = np.frombuffer(b"cdefCDEF", dtype=np.uint8)
MIN_SPLIT_LINES = 64  # below this, lines polars refuses (and orjson takes) go line by line
Parts = tuple[list[tuple[np.ndarray, pa.Table]], list[np.ndarray]]


@dataclass
class BlockResult:
    """What one block gave: rows in line order, rejected lines, spans ignored, lines read.

    `table` is in EVENTS_SCHEMA, or in VIEW_SCHEMA from a decoder built with `views`.
    """

    table: pa.Table
    rejected: list[Rejected] = field(default_factory=list)
    ignored: int = 0
    lines: int = 0
    per_line: int = 0  # lines that took the per-line path (for tests and benchmarks)
    stored: int = 0  # rows a worker process already wrote to the store (not in `table`)


SCAN_BYTES = 1 << 20  # a piece small enough that the scan's temporaries stay in cache

try:
    from collectors import _line_scan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the NumPy scan below serves
    _line_scan = None


@dataclass(frozen=True)
class Scanned:
    """What one pass over a block finds (`_line_scan.c` and `scan_reference` agree on it).

    Positions, in increasing order: every newline; every `\\u0022` and `\\u003a` escape
    (they spell a `"` or `:` that the line's bytes lack); every `\\ud800`-`\\udbff` escape
    without its low half (orjson refuses it, polars does not); every `{` and `[`; every
    byte below 32 but a newline and a line's own CR (orjson refuses them inside strings).
    Escapes count only where their four digits are in the block. Then how many
    backslashes, `"` and `:` the block holds.
    """

    newlines: np.ndarray
    mark_escapes: np.ndarray
    lone_highs: np.ndarray
    openers: np.ndarray
    control: np.ndarray
    backslashes: int
    quotes: int
    colons: int


def scan(block: bytes) -> Scanned:
    """`scan_reference`, natively where the extension is built (5-10x faster)."""
    if _line_scan is None:
        return scan_reference(np.frombuffer(block, dtype=np.uint8))
    *positions, backslashes, quotes, colons = _line_scan.scan(block)
    newlines, marks, highs, openers, control = (
        np.frombuffer(found, dtype=np.int64) for found in positions
    )
    return Scanned(newlines, marks, highs, openers, control, backslashes, quotes, colons)


def scan_reference(data: np.ndarray) -> Scanned:
    """One pass over a block, a piece at a time, with NumPy (see `Scanned`).

    Only a backslash before a `u` can start an escape that matters here; the others
    (`\\n`, `\\"`, ... : three million in a block of `long_unicode`) are only counted.
    A line holding more than MAX_DEPTH `{` and `[` may nest deeper than that, which only
    the per-line path measures (polars' reader crashes the process on a few hundred
    levels).
    """
    newlines, escapes, openers, others = [], [], [], []
    quotes = colons = backslashes = 0
    for at in range(0, len(data), SCAN_BYTES):
        piece = data[at : at + SCAN_BYTES]
        control = np.flatnonzero(piece < 32)  # newlines among them: one pass finds both
        newline = piece[control] == 10
        newlines.append(control[newline] + at)
        if len(newline) > int(np.count_nonzero(newline)):
            others.append(control[~newline] + at)
        slash = piece == ord("\\")
        slashes = int(np.count_nonzero(slash))
        if slashes:
            backslashes += slashes
            after = data[at + 1 : at + SCAN_BYTES + 1]  # one byte into the next piece
            pair = slash[: len(after)] & (after == ord("u"))
            escapes.append(np.flatnonzero(pair) + at)
        # `[` is 0x5B, `{` 0x7B: one OR finds both, and no other byte.
        openers.append(np.flatnonzero((piece | 0x20) == ord("{")) + at)
        quotes += int(np.count_nonzero(piece == ord('"')))
        colons += int(np.count_nonzero(piece == ord(":")))
    empty = np.zeros(0, dtype=np.int64)
    control = np.concatenate([empty, *others])
    if len(control):
        top = len(data) - 1
        after = np.minimum(control + 1, top)
        own_cr = (data[control] == 13) & ((data[after] == 10) | (control == top))
        control = control[~own_cr]
    marks, highs = _escapes(data, np.concatenate([empty, *escapes]))
    return Scanned(
        np.concatenate([empty, *newlines]),
        marks,
        highs,
        np.concatenate([empty, *openers]),
        control,
        backslashes,
        quotes,
        colons,
    )


def _escapes(data: np.ndarray, escapes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the `\\u` escapes at these positions: those that spell a mark, and the high
    surrogates without their low half."""
    escapes = escapes[escapes < len(data) - 5]
    if not len(escapes):
        return escapes, escapes
    # The four digits of each escape as one word, read in one gather: text from
    # `json.dumps` holds an escape for every character beyond ASCII.
    digits = _words(data)[escapes + 2]
    # Only `\\u0022` and `\\u003a` spell a mark (`"`, `:`) that the line's bytes lack;
    # `| 0x20` lowers the last digit's case (`3A`) and leaves `0`-`9` as they are.
    marks = escapes[(digits == _word(b"0022")) | (digits | 0x20 << 24 == _word(b"003a"))]
    # `\\ud8`-`\\udb`: the first digit is looked at in every escape, the second only
    # where the first is a `d`.
    highs = escapes[(digits & 0xFF) | 0x20 == ord("d")]
    highs = highs[np.isin(data[highs + 3], _HIGH_SURROGATE)]
    return marks, highs[~_paired(data, highs)]


def _mark_totals(data: np.ndarray) -> tuple[int, int]:
    """How many `"` and `:` some lines hold."""
    return int(np.count_nonzero(data == ord('"'))), int(np.count_nonzero(data == ord(":")))


def _otlp_words(data: np.ndarray) -> np.ndarray:
    """Where `resourceSpans`, `resourceLogs` or `resource_spans` may start (a superset).

    The bytes after `resource` (`S`, `L`, `_s`) are rare in log lines, where `resource`
    itself (`resource_key`) is in every one: a regular expression or `bytes.find` stops
    at each of those (0.2 µs a line); compares of whole pieces cost two thirds of that.
    """
    found = []
    size = len(_RESOURCE)
    for at in range(size, len(data) - 1, SCAN_BYTES):
        piece = data[at : at + SCAN_BYTES + 1]  # one byte more, for the pair `_s`
        head, after = piece[:-1], piece[1:]
        pair = (head == ord("_")) & (after == ord("s"))
        anchors = (head == ord("S")) | (head == ord("L")) | pair
        starts = np.flatnonzero(anchors) + at - size
        for k, byte in enumerate(_RESOURCE.tolist()):
            starts = starts[data[starts + k] == byte]
        found.append(starts)
    return np.concatenate([np.zeros(0, dtype=np.int64), *found])


class Lines:
    """A block's lines as bounds into its bytes: a line is sliced out only when asked for."""

    def __init__(self, block: bytes) -> None:
        self.block = block
        self.data = np.frombuffer(block, dtype=np.uint8)
        self.scanned = found = scan(block)
        self.backslashes = found.backslashes
        self.mark_totals = (found.quotes, found.colons)
        newlines = found.newlines
        ends = newlines
        if len(block) and block[-1] != 10:
            ends = np.append(ends, len(block))
        self.starts = np.concatenate(([0], newlines + 1))[: len(ends)].astype(np.int64)
        self.ends = ends.astype(np.int64)
        self._marks: np.ndarray | None = None
        self._backslashed: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> bytes:
        return self.block[self.starts[i] : self.ends[i]]

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The lines (sorted, distinct) holding these byte positions."""
        if len(positions) > len(self) and np.all(positions[1:] >= positions[:-1]):
            # Many (sorted) positions: look the lines up among them, not them among the lines.
            bounds = np.append(self.starts, max(len(self.data), int(positions[-1]) + 1))
            return np.flatnonzero(np.diff(np.searchsorted(positions, bounds)))
        return np.unique(np.searchsorted(self.starts, positions, side="right") - 1)

    def joined(self, idx: np.ndarray) -> bytes:
        if len(idx) == len(self) and len(self):
            return self.block
        return b"\n".join([self[i] for i in idx.tolist()])

    def backslashed(self, idx: np.ndarray) -> bool:
        """Whether any of these lines holds a backslash; per line only for a part of the
        block (a read again of some of its lines)."""
        if not self.backslashes or len(idx) == len(self):
            return bool(self.backslashes)
        if self._backslashed is None:
            self._backslashed = np.zeros(len(self), dtype=bool)
            self._backslashed[self.at(np.flatnonzero(self.data == ord("\\")))] = True
        return bool(self._backslashed[idx].any())

    def marks(self) -> np.ndarray:
        """How many `"` and `:` bytes each line holds (see `columnar.py`); computed once."""
        if self._marks is None:
            bounds = np.concatenate((self.starts, self.ends[-1:]))
            counts = []
            for mark in b'":':
                positions = np.flatnonzero(self.data == mark)
                counts.append(np.diff(np.searchsorted(positions, bounds))[: len(self)])
            # Lines are contiguous but for their newline, which holds neither mark.
            self._marks = np.stack(counts, axis=1).astype(np.int64)
        return self._marks

    def marks_of(self, idx: np.ndarray) -> np.ndarray:
        """`marks()` of a few lines, counted in their own bytes."""
        if self._marks is not None:
            return self._marks[idx]
        counts = [(line.count(b'"'), line.count(b":")) for line in map(self.__getitem__, idx)]
        return np.array(counts, dtype=np.int64).reshape(len(idx), 2)


@dataclass
class Classified:
    """Per line: blank, readable column-wise, holding a `\\u` escape of `"` or `:`, and
    its bounds without surrounding whitespace."""

    blank: np.ndarray
    good: np.ndarray
    escaped: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _classify(lines: Lines) -> Classified:
    """Sorts a block's lines by the path that reads them exactly."""
    data, starts, ends = lines.data, lines.starts, lines.ends
    count = len(lines)
    empty = ends == starts
    top = max(len(data) - 1, 0)
    first = data[np.clip(starts, 0, top)] if len(data) else np.zeros(count, np.uint8)
    last = data[np.clip(ends - 1, 0, top)] if len(data) else np.zeros(count, np.uint8)
    padded = ~empty & (np.isin(first, _WHITESPACE) | np.isin(last, _WHITESPACE))
    blank = empty.copy()
    shaped = ~empty & (first == ord("{")) & (last == ord("}"))
    inner_starts, inner_ends = starts, ends
    if padded.any():
        inner_starts, inner_ends = starts.copy(), ends.copy()
        # A CRLF line end (the common padding) is cut off a column at a time.
        before = data[np.clip(ends - 2, 0, top)] if len(data) else last
        crlf = padded & (last == 13) & ~np.isin(first, _WHITESPACE) & (ends - starts >= 2)
        crlf &= ~np.isin(before, _WHITESPACE)
        inner_ends[crlf] -= 1
        shaped[crlf] = (first[crlf] == ord("{")) & (before[crlf] == ord("}"))
        padded &= ~crlf
        for i in np.flatnonzero(padded).tolist():
            line = lines[i]
            stripped = line.strip()
            blank[i] = not stripped
            shaped[i] = stripped[:1] == b"{" and stripped[-1:] == b"}"
            inner_starts[i] += len(line) - len(line.lstrip())
            inner_ends[i] = inner_starts[i] + len(stripped)
    found = lines.scanned
    suspect = np.zeros(count, dtype=bool)
    for positions in (found.control, found.lone_highs):
        if len(positions):
            suspect[lines.at(positions)] = True
    if len(found.openers) > MAX_DEPTH:
        bounds = np.concatenate((starts, ends[-1:]))
        suspect |= np.diff(np.searchsorted(found.openers, bounds))[:count] > MAX_DEPTH
    escaped = np.zeros(count, dtype=bool)
    if len(found.mark_escapes):
        escaped[lines.at(found.mark_escapes)] = True
    good = shaped & ~blank & ~suspect
    return Classified(blank, good, escaped, inner_starts, inner_ends)


def _words(data: np.ndarray) -> np.ndarray:
    """The four bytes from each position of `data` as a little-endian word."""
    return np.ndarray((max(len(data) - 3, 0),), dtype="<u4", buffer=data, strides=(1,))


def _word(four: bytes) -> int:
    return int.from_bytes(four, "little")


def _paired(data: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """Which `\\ud800`-`\\udbff` escapes are followed by a `\\udc00`-`\\udfff` one: a
    surrogate pair (an emoji as Python's `json.dumps` writes it), which polars reads as
    orjson does. A lone low surrogate makes polars refuse the read, so it needs no check."""
    after = highs + 6
    room = after + 3 < len(data)
    after = np.where(room, after, 0)
    return (
        room
        & (data[after] == ord("\\"))
        & (data[after + 1] == ord("u"))
        & ((data[after + 2] | 0x20) == ord("d"))
        & np.isin(data[after + 3], _LOW_SURROGATE)
    )


def _is_json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _views(block: bytes, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte ranges `starts[i]:ends[i]` of `block` as an Arrow binary view array.

    A view names its bytes by offset and length, so the lines are not copied (nor their
    newlines and padding cut off) to be hashed. Views hold 32-bit offsets: one block is
    far below 2 GiB.
    """
    data = np.frombuffer(block, dtype=np.uint8)
    count = len(starts)
    lengths = (ends - starts).astype(np.int32)
    views = np.zeros((count, 4), dtype=np.int32)  # length, prefix, buffer, offset
    views[:, 0] = lengths
    raw = views.view(np.uint8).reshape(count, 16)
    long = lengths > 12
    # A long value's first four bytes, read as one native word from where it starts.
    words = np.ndarray((max(len(block) - 3, 0),), dtype="=i4", buffer=block, strides=(1,))
    if long.all():  # the common case: no mask to apply
        views[:, 1] = words[starts]
        views[:, 3] = starts
    elif long.any():
        at = starts[long]
        views[long, 1] = words[at]
        views[long, 3] = at
    short = np.flatnonzero(~long)
    if len(short):  # up to 12 bytes are held in the view itself
        span = np.arange(12)
        inside = span < lengths[short, None]
        at = np.minimum(starts[short, None] + span, max(len(data) - 1, 0))
        raw[short, 4:16] = np.where(inside, data[at] if len(data) else 0, 0)
    return pa.Array.from_buffers(
        pa.binary_view(), count, [None, pa.py_buffer(views), pa.py_buffer(block)]
    )


def _line_column(lines: Lines, kinds: Classified) -> pl.Series | None:
    """Every line without surrounding whitespace, as a Binary column of views into the
    block (None for a block of 2 GiB or more, beyond a view's offsets)."""
    if len(lines.block) >= 2**31:
        return None
    column = pl.from_arrow(_views(lines.block, kinds.starts, kinds.ends))
    assert isinstance(column, pl.Series)
    return column


def _uids(lines: Lines, column: pl.Series | None) -> pl.Series:
    """The event_uid of every line (`uids.py`), hashed in one call over the block's bytes."""
    if column is None:
        return pl.Series("event_uid", line_uids([lines[i].strip() for i in range(len(lines))]))
    return column_uids(column)


#: Above this many runs of consecutive rows, a block's rows are gathered rather than sliced.
MAX_RUNS = 4096


def _in_order(tables: list[pa.Table], order: np.ndarray, schema: pa.Schema) -> pa.Table:
    """The tables' rows, one after the other, taken in `order`.

    A block's rows are nearly all in one table already in line order, with a few read
    line by line to slot in between: the result is then slices of the tables, one for
    each run of consecutive rows (no copy, and no gather of every row of the block).
    """
    breaks = np.flatnonzero(np.diff(order) != 1) + 1
    if len(breaks) < MAX_RUNS:
        joined = pa.concat_tables([t.cast(schema) for t in tables])
        bounds = np.concatenate(([0], breaks, [len(order)]))
        runs = zip(order[bounds[:-1]].tolist(), np.diff(bounds).tolist(), strict=True)
        return pa.concat_tables([joined.slice(first, length) for first, length in runs])
    return _gathered(tables, order, schema)


def _gathered(tables: list[pa.Table], order: np.ndarray, schema: pa.Schema) -> pa.Table:
    """`_in_order` by a gather of every row.

    Text in views (VIEW_SCHEMA) is put in order by polars, which moves only the views:
    Arrow's `take` has no kernel for them, and casting them to plain text first copies
    every value of the block twice.
    """
    if schema != VIEW_SCHEMA:
        return pa.concat_tables([t.cast(EVENTS_SCHEMA) for t in tables]).take(order)
    frame = pl.concat([_frame(t.cast(VIEW_SCHEMA)) for t in tables], rechunk=False)
    taken = frame[pl.Series(order)].to_arrow(compat_level=pl.CompatLevel.newest())
    return pa.Table.from_arrays([taken[f.name] for f in VIEW_SCHEMA], schema=VIEW_SCHEMA)


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table, rechunk=False)
    assert isinstance(frame, pl.DataFrame)
    return frame


class BlockDecoder:
    """Decodes blocks for one field mapping; cheap to build in each worker process."""

    def __init__(self, mapping: FieldMapping, *, views: bool = False) -> None:
        """`views`: rows may come in VIEW_SCHEMA (for a store that writes it as is)."""
        self.normaliser = Normaliser(mapping)
        self.columnar = ColumnarNormaliser(mapping, views=views)

    def decode(self, block: bytes, first_line: int, source: str) -> BlockResult:
        """Rows of the lines in `block`; line numbers start at `first_line`."""
        lines = Lines(block)
        count = len(lines)
        kinds = _classify(lines)
        blank, good = kinds.blank, kinds.good
        column = _line_column(lines, kinds)
        otlp = np.zeros(count, dtype=bool)
        # Most logs never say `resource`: one search of the lines rules OTLP out.
        if column is None or column.bin.contains(b"resource").any():
            found = _otlp_words(lines.data)
            if len(found):
                candidates = lines.at(found).tolist()
                otlp[candidates] = [is_otlp_line(lines[i]) for i in candidates]
        good &= ~otlp

        good_idx = np.flatnonzero(good)
        uids = _uids(lines, column) if len(good_idx) else pl.Series(dtype=pl.String)

        def read(idx: np.ndarray, full: bool = False, screened: bool = False) -> Parts:
            payload = lines.joined(idx)
            totals = None
            if not kinds.escaped[idx].any():
                totals = lines.mark_totals
                if payload is not block:
                    totals = _mark_totals(np.frombuffer(payload, dtype=np.uint8))
            marks = LineMarks(
                lambda: lines.marks()[idx],
                totals,
                lines.backslashed(idx),
                lambda which: lines.marks_of(idx[which]),
            )
            try:
                got = self.columnar.normalise(payload, marks, uids.gather(idx), source, full=full)
            except DecodeFailed:
                if not full:
                    return read(idx, True, screened)
                if not screened:
                    # Lines orjson refuses go line by line (to be rejected with its reason);
                    # the rest is read again.
                    valid = np.fromiter((_is_json(lines[i]) for i in idx.tolist()), bool, len(idx))
                    tables, fallbacks = read(idx[valid], False, True) if valid.any() else ([], [])
                    return tables, [*fallbacks, idx[~valid]]
                if len(idx) <= MIN_SPLIT_LINES:
                    return [], [idx]
                half = len(idx) // 2
                first, second = read(idx[:half], False, True), read(idx[half:], False, True)
                return first[0] + second[0], first[1] + second[1]
            tables = [(idx[got.kept], got.table)]
            fallback = idx[got.fallback]
            if len(fallback) <= max(MIN_SPLIT_LINES, len(idx) // 100):
                return tables, [fallback]
            if not full:
                # Keys or types first seen after polars' schema sample: read those again
                # with the schema inferred from all of them.
                again = read(fallback, True, screened)
                return tables + again[0], again[1]
            if len(fallback) < len(idx) // 2:
                # One odd line can turn a whole column to text; read the rows it spoiled in
                # halves, so the odd line spoils fewer. (Lines that are all odd stop here.)
                half = len(fallback) // 2
                first, second = read(fallback[:half]), read(fallback[half:])
                return tables + first[0] + second[0], first[1] + second[1]
            return tables, [fallback]

        tables, fallbacks = read(good_idx) if len(good_idx) else ([], [])
        # `read` calls itself, so it and its cell form a cycle that holds the block until a
        # garbage collection; unbound here, the block goes when `decode` returns (and an
        # ingest worker reads the next block into the same memory).
        read = None  # type: ignore[assignment]
        per_line = np.sort(
            np.concatenate([np.flatnonzero(~good & ~blank & ~otlp), *fallbacks]).astype(np.int64)
        )
        result = BlockResult(table=empty_table(), lines=count, per_line=len(per_line))
        rejected: list[tuple[int, Rejected]] = []
        parts = [(numbers, table) for numbers, table in tables if table.num_rows]
        parts += self._per_line(per_line, lines, first_line, source, rejected)
        parts += self._otlp(np.flatnonzero(otlp), lines, first_line, source, rejected, result)
        if len(parts) == 1 and np.all(np.diff(parts[0][0]) > 0):
            result.table = parts[0][1]
        elif parts:
            order = np.argsort(np.concatenate([n for n, _ in parts]), kind="stable")
            result.table = _in_order([table for _, table in parts], order, self.columnar.schema)
        result.rejected = [r for _, r in sorted(rejected, key=lambda pair: pair[0])]
        return result

    def _per_line(
        self,
        idx: np.ndarray,
        lines: Lines,
        first_line: int,
        source: str,
        rejected: list[tuple[int, Rejected]],
    ) -> list[tuple[np.ndarray, pa.Table]]:
        if not len(idx):
            return []
        numbered = [(first_line + i, lines[i]) for i in idx.tolist()]
        decoded = decode_lines(numbered, self.normaliser, source)
        prefix = f"{source}:"
        rejected += [(int(r.where.removeprefix(prefix)) - first_line, r) for r in decoded.rejected]
        refused = {r.where for r in decoded.rejected}
        stored = [
            number - first_line
            for number, line in numbered
            if line.strip() and f"{source}:{number}" not in refused
        ]
        if not decoded.rows:
            return []
        return [(np.array(stored, dtype=np.int64), rows_to_table(decoded.rows))]

    def _otlp(
        self,
        idx: np.ndarray,
        lines: Lines,
        first_line: int,
        source: str,
        rejected: list[tuple[int, Rejected]],
        result: BlockResult,
    ) -> list[tuple[np.ndarray, pa.Table]]:
        parts = []
        for i in idx.tolist():
            decoded = decode_otlp_lines([(first_line + i, lines[i])], self.normaliser, source)
            rejected += [(i, r) for r in decoded.rejected]
            result.ignored += decoded.ignored
            if decoded.rows:
                numbers = np.full(len(decoded.rows), i, dtype=np.int64)
                parts.append((numbers, rows_to_table(decoded.rows)))
        return parts
