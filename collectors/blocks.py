"""One block of lines (tens of MB) -> canonical rows: column-wise where exact, else per line.

The per-line path (`decode_lines`, `decode_otlp_lines`) is the reference. A block is split
into lines once; lines that the column-wise path (`columnar.py`) can read exactly go to it
in one polars read, and only the others (explicit nulls, arrays, odd bytes, OTLP, lines
polars refused or rows it may have coerced) go line by line. So a bad line is still
reported with its file:line and reason, and a good block costs a few column operations.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from collectors.arrow_batch import rows_to_table
from collectors.columnar import ColumnarNormaliser, DecodeFailed
from collectors.jsonlines import Rejected, decode_lines
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.otlp_lines import decode_otlp_lines, is_otlp_line
from store.schema import EVENTS_SCHEMA

# Explicit nulls, arrays, empty objects, repeated keys and values polars coerced are all
# caught after the read (they change a row's `"` count, its types or its shape). What is
# left to find before it: surrogate escapes, which orjson refuses when unpaired and polars
# does not, and control bytes, which orjson refuses inside strings.
_SURROGATE = r"\\u[dD][89abAB]"
_OTLP_TOKENS = (b"resourceSpans", b"resourceLogs", b"resource_spans")
_WHITESPACE = np.frombuffer(b" \t\r\x0b\x0c", dtype=np.uint8)
MIN_SPLIT_LINES = 64  # below this, lines polars refuses (and orjson takes) go line by line
Parts = tuple[list[tuple[np.ndarray, pa.Table]], list[np.ndarray]]


@dataclass
class BlockResult:
    """What one block gave: rows in line order, rejected lines, spans ignored, lines read."""

    table: pa.Table
    rejected: list[Rejected] = field(default_factory=list)
    ignored: int = 0
    lines: int = 0
    per_line: int = 0  # lines that took the per-line path (for tests and benchmarks)


def _line_bounds(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, newline excluded) of every line in a block."""
    newlines = np.flatnonzero(data == 10)
    ends = newlines
    if len(data) and data[-1] != 10:
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], newlines + 1))[: len(ends)]
    return starts.astype(np.int64), ends.astype(np.int64)


def _lines_at(block: bytes, positions: list[int], starts: np.ndarray) -> np.ndarray:
    return np.unique(np.searchsorted(starts, np.array(positions, dtype=np.int64), side="right") - 1)


def _find_all(block: bytes, token: bytes) -> list[int]:
    found, at = [], block.find(token)
    while at != -1:
        found.append(at)
        at = block.find(token, at + 1)
    return found


def _classify(
    block: bytes, lines: list[bytes], data: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(blank, readable column-wise) for every line of the block."""
    count = len(lines)
    empty = ends == starts
    top = max(len(data) - 1, 0)
    first = data[np.clip(starts, 0, top)] if len(data) else np.zeros(count, np.uint8)
    last = data[np.clip(ends - 1, 0, top)] if len(data) else np.zeros(count, np.uint8)
    padded = ~empty & (np.isin(first, _WHITESPACE) | np.isin(last, _WHITESPACE))
    blank = empty.copy()
    shaped = ~empty & (first == ord("{")) & (last == ord("}"))
    for i in np.flatnonzero(padded).tolist():
        stripped = lines[i].strip()
        blank[i] = not stripped
        shaped[i] = stripped[:1] == b"{" and stripped[-1:] == b"}"
    # Control bytes other than a line's own CR LF: orjson refuses them inside strings.
    control = np.flatnonzero((data < 32) & (data != 10))
    if len(control):
        after = np.minimum(control + 1, top)
        own_cr = (data[control] == 13) & ((data[after] == 10) | (control == top))
        control = control[~own_cr]
    suspect = np.zeros(count, dtype=bool)
    if len(control):
        suspect[_lines_at(block, control.tolist(), starts)] = True
    escapes = _find_all(block, b"\\u")
    if escapes:
        rows = _lines_at(block, escapes, starts)
        subset = pa.array([lines[i] for i in rows.tolist()], pa.binary())
        hit = pc.match_substring_regex(subset, _SURROGATE).to_numpy(zero_copy_only=False)
        suspect[rows[hit]] = True
    return blank, shaped & ~blank & ~suspect


def _is_json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _mark_counts(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many `"` and `:` bytes each line holds (see `columnar.py`)."""
    offsets = np.append(starts, len(data)).astype(np.int64)
    array = pa.Array.from_buffers(
        pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    counts = [pc.count_substring(array, mark).to_numpy(zero_copy_only=False) for mark in '":']
    return np.stack(counts, axis=1).astype(np.int64)


def _uids(lines: list[bytes]) -> list[str]:
    """event_uid = content_uid(line.strip()), computed in one tight loop."""
    blake2b = hashlib.blake2b
    uids = []
    for line in lines:
        digest = blake2b(line.strip(), digest_size=16)  # strip() is free on a stripped line
        digest.update(b"\x1f")
        uids.append(digest.hexdigest())
    return uids


class BlockDecoder:
    """Decodes blocks for one field mapping; cheap to build in each worker process."""

    def __init__(self, mapping: FieldMapping) -> None:
        self.normaliser = Normaliser(mapping)
        self.columnar = ColumnarNormaliser(mapping)

    def decode(self, block: bytes, first_line: int, source: str) -> BlockResult:
        """Rows of the lines in `block`; line numbers start at `first_line`."""
        data = np.frombuffer(block, dtype=np.uint8)
        starts, ends = _line_bounds(data)
        lines = block.split(b"\n")
        if block.endswith(b"\n") or not block:
            lines.pop()
        count = len(lines)
        blank, good = _classify(block, lines, data, starts, ends)
        otlp = np.zeros(count, dtype=bool)
        if any(token in block for token in _OTLP_TOKENS):
            otlp = np.fromiter((is_otlp_line(line) for line in lines), bool, count)
        good &= ~otlp
        marks = _mark_counts(data, starts, ends)

        good_idx = np.flatnonzero(good)
        uids = _uids([lines[i] for i in good_idx])
        uid_of = dict(zip(good_idx.tolist(), uids, strict=True))
        whole = len(good_idx) == count and count > 0

        def read(idx: np.ndarray, full: bool = False, screened: bool = False) -> Parts:
            if whole and len(idx) == count:
                payload = block
            else:
                payload = b"\n".join(lines[i] for i in idx)
            try:
                got = self.columnar.normalise(
                    payload, marks[idx], [uid_of[i] for i in idx.tolist()], source, full=full
                )
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
        per_line = np.sort(
            np.concatenate([np.flatnonzero(~good & ~blank & ~otlp), *fallbacks]).astype(np.int64)
        )
        result = BlockResult(table=EVENTS_SCHEMA.empty_table(), lines=count, per_line=len(per_line))
        rejected: list[tuple[int, Rejected]] = []
        parts = [(numbers, table) for numbers, table in tables if table.num_rows]
        parts += self._per_line(per_line, lines, first_line, source, rejected)
        parts += self._otlp(np.flatnonzero(otlp), lines, first_line, source, rejected, result)
        if parts:
            order = np.concatenate([numbers for numbers, _ in parts])
            table = pa.concat_tables([table for _, table in parts])
            result.table = table.take(np.argsort(order, kind="stable"))
        result.rejected = [r for _, r in sorted(rejected, key=lambda pair: pair[0])]
        return result

    def _per_line(
        self,
        idx: np.ndarray,
        lines: list[bytes],
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
        lines: list[bytes],
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
