"""JSON lines -> canonical rows a column at a time: the normaliser's rules, vectorised.

`Normaliser.normalise` is the reference: for every row this module keeps, the result is
the row that path would build. Whatever it cannot read exactly (a type it does not
handle, a value polars coerced, a timestamp in an unusual form, a row the contract
refuses) it marks, and the caller sends those lines through the per-record path, which
stores them or rejects them with its own reason.

How a coercion is caught: polars reads a column that mixes numbers and strings as text,
a nested object among strings as its JSON text, a key first seen after schema inference
not at all, a repeated key once, and an explicit null like an absent field. A row written
back from what polars read would then hold more `"` (a value turned into text) or fewer
`:` (a key lost) than its line does, so rows whose counts differ from their line's go to
the per-record path. Colons alone catch every lost key, and with the keys all there, a
change in quotes can only come from a coercion; neither can hide the other. Arrays and
other types this module does not read are refused by their dtype.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import orjson
import polars as pl
import pyarrow as pa

from collectors import text_views
from collectors.mapping import FieldMapping
from collectors.timestamps_vec import micros_column, number_text
from store.contract import (
    CELERY_RETRIES,
    EVENT_KINDS,
    FIELDS,
    INT_FIELDS,
    MICROS_RANGE,
    MIN_DELIVERY_ATTEMPT,
    NO_JOB_ID_KINDS,
    OPERATION_EVENTS,
    OPERATION_KEYS,
    STRING_FIELDS,
    int_range,
)
from store.schema import EVENTS_SCHEMA, VIEW_SCHEMA

_SCALARS = (pl.String, pl.Int64, pl.Float64, pl.Boolean)
# The text polars makes of a value it read into a text column: a number, a boolean, null,
# an object or an array (a string read as itself may look so too).
_COERCED = r"^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$|[{\[])"
_COERCED_WORDS = ["true", "false", "null"]
_BAD = "__dupescope_bad"
_OUT = "__dupescope_out_"
_TS = "__dupescope_ts_"
_ATTRS = "__dupescope_attrs"


def _out(name: str) -> pl.Expr:
    return pl.col(_OUT + name)


class DecodeFailed(ValueError):
    """Polars could not read these lines as one table; split them or go row by row."""


@dataclass
class Columnar:
    """Canonical rows for the lines that were read exactly, and the lines that were not."""

    table: pa.Table  # EVENTS_SCHEMA (or VIEW_SCHEMA), one row per kept line, in line order
    kept: np.ndarray  # indices (into the lines given) of the rows of `table`
    fallback: np.ndarray  # indices of lines for the per-record path


#: Lines polars infers a block's schema from.
SCHEMA_SAMPLE = 1000


def read_frame(data: bytes, *, full_inference: bool) -> pl.DataFrame:
    """The lines as one frame, each column in one chunk.

    The reader leaves a column of a 64 MB block in about 130 chunks, and every later step
    pays per chunk: joining them (views, not text) costs less than it saves.

    The schema is inferred from the first thousand lines: a log that mixes shapes line by
    line shows all its keys there, where a hundred lines miss some and their rows are read
    twice. Inferring from every line would double the read.
    """
    sample = None if full_inference else SCHEMA_SAMPLE
    try:
        frame = pl.read_ndjson(io.BytesIO(data), infer_schema_length=sample)
    except Exception as exc:  # polars raises several error types for bad input
        raise DecodeFailed(str(exc)) from exc
    return frame.rechunk()


@dataclass
class LineMarks:
    """The `"` and `:` counts of the lines being read, as `_written_marks` counts rows.

    `rows` gives them per line (costly, so only asked for when needed); `totals` is their
    sum over all lines, or None where a line holds a `\\u0022` or `\\u003a` escape (then a
    row may hold a mark its line spells as an escape, and only the per-line counts are
    exact; no other escape spells a mark).
    `escapes` says whether any line holds a backslash: without one, no text value read
    holds a byte that JSON must escape. `some`, where given, counts a few lines only (by
    their index among the lines read), for less than `rows` costs.
    """

    rows: Callable[[], np.ndarray]
    totals: tuple[int, int] | None
    escapes: bool = True
    some: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass
class Leaves:
    """A frame's values by dotted name, as `flatten` names them.

    `columns` holds the leaf columns; `empty` names those that hold an empty object
    (`{}`, which `flatten` keeps as a value), as the text `{}` where the line held one.
    `nodes` is every value read (objects and leaves, for `_written_marks`); `bad` marks
    rows that must go row by row (a type this module does not read, or two spellings of
    one dotted key in the same row).
    """

    columns: dict[str, pl.Series]
    empty: set[str]
    nodes: list[pl.Series]
    bad: np.ndarray


def _leaves(frame: pl.DataFrame) -> Leaves:
    """Flatten nested objects to dotted names, as `flatten` does."""
    rows = frame.height
    bad = np.zeros(rows, dtype=bool)
    leaves: dict[str, pl.Series] = {}
    empty: set[str] = set()
    nodes: list[pl.Series] = []

    def add(name: str, series: pl.Series, hollow: bool) -> None:
        if name in leaves:
            present = series.is_not_null().to_numpy()
            earlier = leaves[name]
            bad[present & earlier.is_not_null().to_numpy()] = True
            if earlier.dtype != series.dtype or hollow or name in empty:
                bad[present] = True
                return
            series = earlier.zip_with(earlier.is_not_null(), series)
        leaves[name] = series.alias(name)
        if hollow:
            empty.add(name)

    def visit(name: str, series: pl.Series) -> None:
        nodes.append(series.alias(name))
        if isinstance(series.dtype, pl.Struct):
            present = series.is_not_null()
            fields = series.struct.unnest()
            hollow = present
            if fields.width:
                nothing = fields.select(pl.all_horizontal(pl.all().is_null())).to_series()
                hollow = present & nothing
            # Present with no field present: the line held `{}`, which `flatten` keeps as is.
            if hollow.any():
                text = pl.select(pl.when(hollow).then(pl.lit("{}"))).to_series()
                add(name, text, True)
            for field in fields.columns:
                visit(f"{name}.{field}", fields[field])
            return
        if series.dtype == pl.Null:
            return
        if series.dtype not in _SCALARS:
            bad[series.is_not_null().to_numpy()] = True
            return
        add(name, series, False)

    for column in frame.columns:
        visit(column, frame[column])
    return Leaves(leaves, empty, nodes, bad)


def _key_marks(node: pl.Series) -> tuple[int, int]:
    """The `"` and `:` a present value adds for its key (and its quotes, if text)."""
    quotes = 2 + node.name.count('"') + (2 if node.dtype == pl.String else 0)
    return quotes, 1 + node.name.count(":")


def _written_marks(nodes: list[pl.Series], rows: int) -> np.ndarray:
    """Per row, the `"` and `:` its line would hold if written back from what was read."""
    marks = np.zeros((rows, 2), dtype=np.int64)
    for node in nodes:
        present = node.is_not_null().to_numpy()
        marks[present] += _key_marks(node)
        if node.dtype == pl.String:
            marks += _text_marks_per_row(node)
    return marks


def _text_bytes(text: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A text column's bytes and the offsets of its values in them (nulls as empty).

    Arrow leaves a null slot's bytes undefined. Polars writes them empty, so the column
    is filled (a copy of every value) only where the null slots hold any byte.
    """
    array = _large_text(text)
    offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset :][: len(array) + 1]
    if array.null_count and int(offsets[-1] - offsets[0]) != text.str.len_bytes().sum():
        array = _large_text(text.fill_null(""))
        offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset :][: len(array) + 1]
    data = array.buffers()[2]
    return np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8), offsets


def _large_text(text: pl.Series) -> pa.Array:
    """A text column as one Arrow `large_string` array (offsets and bytes)."""
    array = text.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array


def _text_marks_per_row(text: pl.Series) -> np.ndarray:
    """The `"` and `:` inside each value of a text column, as (rows, 2) counts."""
    data, offsets = _text_bytes(text)
    counts = np.zeros((len(text), 2), dtype=np.int64)
    for axis, mark in enumerate(b'":'):
        positions = np.flatnonzero(data[offsets[0] : offsets[-1]] == mark) + offsets[0]
        if len(positions):
            counts[:, axis] = np.diff(np.searchsorted(positions, offsets))
    return counts


TextBytes = dict[int, tuple[np.ndarray, np.ndarray]]


def _text_bytes_of(text: pl.Series, texts: TextBytes | None) -> tuple[np.ndarray, np.ndarray]:
    """`_text_bytes`, kept in `texts` (by series) for the next look at the same column."""
    if texts is None:
        return _text_bytes(text)
    if id(text) not in texts:
        texts[id(text)] = _text_bytes(text)
    return texts[id(text)]


def _written_totals(nodes: list[pl.Series], texts: TextBytes | None = None) -> tuple[int, int]:
    """`_written_marks` summed over all rows, without a per-row array."""
    quotes = colons = 0
    for node in nodes:
        present = node.len() - node.null_count()
        if not present:
            continue
        key_quotes, key_colons = _key_marks(node)
        quotes += present * key_quotes
        colons += present * key_colons
        if node.dtype == pl.String:
            inner_quotes, inner_colons = _text_marks(node, texts)
            quotes += inner_quotes
            colons += inner_colons
    return quotes, colons


def _text_marks(text: pl.Series, texts: TextBytes | None = None) -> tuple[int, int]:
    """The `"` and `:` inside all values of a text column: counted in its views where the
    native read is built, else in its Arrow bytes (`_text_marks_reference`)."""
    counted = text_views.marks(text)
    return counted if counted is not None else _text_marks_reference(text, texts)


def _text_marks_reference(text: pl.Series, texts: TextBytes | None = None) -> tuple[int, int]:
    """`_text_marks` with NumPy, on the column's bytes copied out of polars."""
    data, offsets = _text_bytes_of(text, texts)
    data = data[offsets[0] : offsets[-1]]
    return int(np.count_nonzero(data == ord('"'))), int(np.count_nonzero(data == ord(":")))


def _byte_set(members: bytes) -> np.ndarray:
    """A lookup table: which of the 256 byte values are among `members`."""
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(members, dtype=np.uint8)] = True
    return table


_COERCED_FIRST = _byte_set(b"-0123456789tfn{[")
_NUMBER_FIRST = _byte_set(b"-0123456789")
_DIGIT = _byte_set(b"0123456789")
_AFTER_DIGIT = _byte_set(b"0123456789.eE")


def _maybe_coerced(
    values: pl.Series, texts: TextBytes | None = None, known: np.ndarray | None = None
) -> np.ndarray:
    """Values that may be a number, boolean, null, object or array polars read as text,
    but for rows where `known` is set: read in the column's views where the native read
    is built, else `_maybe_coerced_reference`."""
    found = text_views.coerced(values)
    if found is None:
        return _maybe_coerced_reference(values, texts, known)
    return found & ~known if known is not None else found.copy()


def _maybe_coerced_reference(
    values: pl.Series, texts: TextBytes | None = None, known: np.ndarray | None = None
) -> np.ndarray:
    """`_maybe_coerced` with NumPy and a regular expression: the few values whose first
    byte could start one are matched in full.

    A value starting as a number is one only if its second byte can follow its first,
    which is told for all values at once: most ids such as `0c5b...-0` are not matched
    one by one. Rows where `known` is set are left out (the caller treats them apart).
    """
    data, offsets = _text_bytes_of(values, texts)
    starts, lengths = offsets[:-1], np.diff(offsets)
    first = data[np.minimum(starts, max(len(data) - 1, 0))] if len(data) else lengths * 0
    candidate = (lengths > 0) & _COERCED_FIRST[first]
    if known is not None:
        candidate &= ~known
    which = np.flatnonzero(candidate)
    numeric = which[_NUMBER_FIRST[first[which]] & (lengths[which] > 1)]
    if len(numeric):
        # A number's second byte is a digit (or `.`, `e`, `E` after a digit).
        second = data[starts[numeric] + 1]
        after = np.where(first[numeric] == ord("-"), _DIGIT[second], _AFTER_DIGIT[second])
        if not after.all():
            candidate[numeric[~after]] = False
            which = np.flatnonzero(candidate)
    maybe = np.zeros(len(values), dtype=bool)
    if len(which):
        some = values.gather(pl.Series(which))
        matched = some.str.contains(_COERCED) | some.is_in(_COERCED_WORDS)
        maybe[which] = matched.fill_null(False).to_numpy()
    return maybe


def _miscounted(
    nodes: list[pl.Series],
    bad: np.ndarray,
    marks: LineMarks,
    stamps: list[pl.Series],
    numbers: dict[str, pl.Series],
) -> np.ndarray:
    """Rows whose marks differ from their line's: a key lost or a value coerced.

    Without `\\u` escapes a row can only lose marks by losing a key (and then a colon) and
    gain them only through a coercion (never a colon), so when every row is otherwise fine
    and the totals agree, so does every row: the per-row counts are then not needed.

    `stamps` are the timestamp columns read as text. Where a log writes some timestamps as
    numbers and others as text, polars reads the numbers as their digits; a timestamp
    means the same quoted or not (`to_micros` reads digits as the number they spell), and
    is never kept in `attrs`, so such a row is kept when its missing quotes are those of
    its digit timestamps, and no other value of the row could be a coercion. `numbers`
    holds `number_text` of each of them, by name.
    """
    rows = len(bad)
    if marks.totals is not None:
        texts: TextBytes = {}
        totals = _written_totals(nodes, texts)
        if not bad.any() and totals == marks.totals:
            return np.zeros(rows, dtype=bool)
        by_totals = _miscounted_by_totals(nodes, bad, marks, stamps, numbers, totals, texts)
        texts.clear()
        if by_totals is not None:
            return by_totals
    written, line = _written_marks(nodes, rows), marks.rows()
    off = written != line
    miscounted = off.any(axis=1)
    if stamps and miscounted.any():
        # Looked at only in the rows that may be so explained: the others stay miscounted.
        which = np.flatnonzero(miscounted & ~off[:, 1] & (written[:, 0] > line[:, 0]))
        taken = pl.Series(which)
        digits = np.zeros(len(which), dtype=np.int64)
        taken_numbers = {}
        for stamp in stamps:
            taken_numbers[stamp.name] = numbers[stamp.name].gather(taken)
            digits += taken_numbers[stamp.name].to_numpy()
        coerced = np.zeros(len(which), dtype=bool)
        for node in nodes:
            if node.dtype == pl.String:
                maybe = _maybe_coerced(node.gather(taken))
                if node.name in taken_numbers:
                    maybe &= ~taken_numbers[node.name].to_numpy()
                coerced |= maybe
        unquoted = written[which, 0] - line[which, 0] == 2 * digits
        miscounted[which[unquoted & ~coerced]] = False
    return miscounted


def _miscounted_by_totals(
    nodes: list[pl.Series],
    bad: np.ndarray,
    marks: LineMarks,
    stamps: list[pl.Series],
    stamp_numbers: dict[str, pl.Series],
    totals: tuple[int, int],
    texts: TextBytes | None = None,
) -> np.ndarray | None:
    """`_miscounted` from the totals and the counts of a few rows, or None where those
    cannot tell.

    The few rows are those already bad and those holding a value that may be a coercion
    (other than a timestamp's digits): they are counted one by one. In every other row
    the colons cannot rise and fall only with a lost key; with the colons equal in total,
    each row's quotes can only rise, by two for each digit timestamp its line did not
    quote (no other value there could be a coercion). So when the quotes differ in total
    by twice the number of those rows' digit timestamps, every one of them was unquoted:
    each of those rows meets the row-by-row rule, and none of them is miscounted.
    """
    assert marks.totals is not None
    if marks.some is None:
        return None
    rows = len(bad)
    numbers = {s.name: stamp_numbers[s.name].to_numpy() for s in stamps}
    digits = np.zeros(rows, dtype=np.int64)
    for number in numbers.values():
        digits += number
    suspect = bad.copy()
    for node in nodes:
        if node.dtype == pl.String:
            suspect |= _maybe_coerced(node, texts, numbers.get(node.name))
    which = np.flatnonzero(suspect)
    if len(which) > rows // 10:
        return None
    taken = pl.Series(which, dtype=pl.Int64)
    written = _written_marks([node.gather(taken) for node in nodes], len(which))
    line = marks.some(which)
    rest = np.array(totals) - written.sum(axis=0)
    rest_line = np.array(marks.totals) - line.sum(axis=0)
    unquoted = 2 * (digits.sum() - digits[which].sum())
    if rest[1] != rest_line[1] or rest[0] - rest_line[0] != unquoted:
        return None
    miscounted = np.zeros(rows, dtype=bool)
    miscounted[which] = (written != line).any(axis=1)
    return miscounted


def _first_present(values: list[tuple[pl.Expr, pl.Expr]]) -> pl.Expr:
    """The value of the first source present in a row, as `Normaliser._take` picks it."""
    if not values:
        return pl.lit(None)
    chain = pl.when(values[0][0]).then(values[0][1])
    for present, value in values[1:]:
        chain = chain.when(present).then(value)
    return chain.otherwise(None)


def _as_string(column: pl.Expr, dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """(value, needs the row path): text as is, integers as Python's `str` writes them."""
    if dtype == pl.String:
        return column, pl.lit(False)
    if dtype == pl.Int64:
        return column.cast(pl.String), pl.lit(False)
    return pl.lit(None, dtype=pl.String), column.is_not_null()


def _as_int(column: pl.Expr, dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """(value, needs the row path): integers, and floats that are whole numbers."""
    if dtype == pl.Int64:
        return column, pl.lit(False)
    if dtype == pl.Float64:
        whole = column.is_finite() & (column == column.floor()) & (column.abs() < 2.0**53)
        return pl.when(whole).then(
            column.cast(pl.Int64, strict=False)
        ), column.is_not_null() & ~whole
    return pl.lit(None, dtype=pl.Int64), column.is_not_null()


class ColumnarNormaliser:
    """The column-wise twin of `Normaliser`, for one field mapping."""

    def __init__(self, mapping: FieldMapping, *, views: bool = False) -> None:
        self.mapping = mapping
        self.schema = VIEW_SCHEMA if views else EVENTS_SCHEMA
        self.sources = {name: mapping.sources_for(name) for name in FIELDS}
        self.read_keys = {
            *(key for keys in self.sources.values() for key in keys),
            *OPERATION_KEYS,
            CELERY_RETRIES,
        }

    def normalise(
        self, data: bytes, marks: LineMarks, uids: pl.Series, source: str, *, full: bool
    ) -> Columnar:
        """Rows for the lines in `data` (non-blank, no nulls/arrays), in order.

        `marks` counts each line's `"` and `:`, `uids` holds its event_uid.
        Raises DecodeFailed when polars cannot read the lines as one table.
        """
        frame = read_frame(data, full_inference=full)
        if frame.height != len(uids):
            raise DecodeFailed(f"read {frame.height} rows from {len(uids)} lines")
        found = _leaves(frame)
        leaves, nodes, bad = found.columns, found.nodes, found.bad
        # An empty object where a canonical field (or an operation, or celery.retries) is
        # read is for the row path to refuse or read.
        for name in found.empty & self.read_keys:
            bad |= leaves[name].is_not_null().to_numpy()
        stamps = [
            leaves[n] for n in self.sources["ts"] if n in leaves and leaves[n].dtype == pl.String
        ]
        numbers = {stamp.name: number_text(stamp) for stamp in stamps}
        bad |= _miscounted(nodes, bad, marks, stamps, numbers)
        table = pl.DataFrame(list(leaves.values())) if leaves else pl.DataFrame({})
        table = table.with_columns(pl.Series(_BAD, bad)) if leaves else pl.DataFrame({_BAD: bad})
        dtypes = dict(table.schema)
        consumed: set[str] = set()

        def take(canonical: str) -> list[tuple[str, pl.DataType]]:
            names = [n for n in self.sources[canonical] if n in leaves and n not in consumed]
            consumed.update(self.sources[canonical])
            return [(n, dtypes[n]) for n in names]

        exprs: dict[str, pl.Expr] = {}
        needs: list[pl.Expr] = [pl.col(_BAD)]

        ts_sources = take("ts")
        stamps = [micros_column(table[n], numbers.get(n)).alias(_TS + n) for n, _ in ts_sources]
        table = table.with_columns(stamps) if stamps else table
        exprs["ts"] = _first_present(
            [(pl.col(n).is_not_null(), pl.col(_TS + n)) for n, _ in ts_sources]
        )
        needs.append(_out("ts").is_null() | ~_out("ts").is_between(*MICROS_RANGE))

        exprs["event"], event_needs = self._event(take("event"), leaves, consumed, dtypes)
        needs.append(event_needs | ~_out("event").is_in(EVENT_KINDS).fill_null(False))

        for name in STRING_FIELDS:
            picked = [(n, *_as_string(pl.col(n), t)) for n, t in take(name)]
            exprs[name] = _first_present([(pl.col(n).is_not_null(), v) for n, v, _ in picked])
            needs.append(_first_present([(pl.col(n).is_not_null(), b) for n, _, b in picked]))
        for name in INT_FIELDS:
            picked = [(n, *_as_int(pl.col(n), t)) for n, t in take(name)]
            exprs[name] = _first_present([(pl.col(n).is_not_null(), v) for n, v, _ in picked])
            needs.append(_first_present([(pl.col(n).is_not_null(), b) for n, _, b in picked]))

        attempt = exprs["delivery_attempt"]
        if CELERY_RETRIES in leaves and CELERY_RETRIES not in consumed:
            retries, retries_needs = _as_int(pl.col(CELERY_RETRIES), dtypes[CELERY_RETRIES])
            needs.append(attempt.is_null() & retries_needs)
            attempt = pl.coalesce(attempt, retries + 1)
        exprs["delivery_attempt"] = attempt
        attempt = _out("delivery_attempt")
        needs.append(
            attempt.is_not_null()
            & ~attempt.is_between(MIN_DELIVERY_ATTEMPT, int_range("delivery_attempt")[1])
        )
        job_id = _out("job_id")
        needs.append(~_out("event").is_in(NO_JOB_ID_KINDS) & (job_id.is_null() | (job_id == "")))

        rest = [n for n in leaves if n not in consumed]
        shaped = _attrs_by_shape(table, leaves, rest, marks.escapes, found.empty)
        if shaped is None:
            exprs["attrs"] = _attrs(leaves, rest, marks.escapes, found.empty)
        else:
            table = table.with_columns(shaped.alias(_ATTRS))
            exprs["attrs"] = pl.col(_ATTRS)
        # A whole-number float may have been an integer in its line (polars widens a column
        # that mixes them), and would be written back as 5.0 where the line said 5.
        needs += [pl.col(n) == pl.col(n).floor() for n in rest if dtypes[n] == pl.Float64]

        # Two steps, so each canonical value is computed once and the checks read it.
        staged = table.with_columns([e.alias(_OUT + k) for k, e in exprs.items()])
        built = staged.select(
            pl.any_horizontal([n.fill_null(False) for n in needs]).alias(_BAD),
            uids.alias("event_uid"),
            *[_out(k).alias(k) for k in exprs],
        )
        fallback = built[_BAD].to_numpy()
        kept_frame = built.filter(~pl.col(_BAD))
        return Columnar(
            table=_to_arrow(kept_frame, source, self.schema),
            kept=np.flatnonzero(~fallback),
            fallback=np.flatnonzero(fallback),
        )

    def _event(
        self,
        sources: list[tuple[str, pl.DataType]],
        leaves: dict[str, pl.Series],
        consumed: set[str],
        dtypes: dict[str, pl.DataType],
    ) -> tuple[pl.Expr, pl.Expr]:
        named = _first_present(
            [
                (pl.col(n).is_not_null(), pl.col(n) if t == pl.String else pl.lit(None, pl.String))
                for n, t in sources
            ]
        )
        needs = _first_present(
            [(pl.col(n).is_not_null(), pl.lit(t != pl.String)) for n, t in sources]
        )
        operations = [n for n in OPERATION_KEYS if n in leaves and n not in consumed]
        if operations:
            operation = _first_present(
                [
                    (
                        pl.col(n).is_not_null(),
                        pl.col(n).replace_strict(OPERATION_EVENTS, default=None)
                        if dtypes[n] == pl.String
                        else pl.lit(None, pl.String),
                    )
                    for n in operations
                ]
            )
            present = pl.any_horizontal([pl.col(n).is_not_null() for n in operations])
            value = pl.when(named.is_not_null()).then(named).otherwise(operation)
            needs = pl.coalesce(needs, present & operation.is_null())
        else:
            value = named
        if self.mapping.events:
            value = value.replace(self.mapping.events)
        return value.cast(pl.String), needs.fill_null(False)


def _attr_pieces(
    leaves: dict[str, pl.Series], names: list[str], escapes: bool, empty: set[str]
) -> list[list[pl.Expr]]:
    """Each field as its `"key":value` text, null where the field is absent."""
    pieces: list[list[pl.Expr]] = []
    for name in names:
        column, series = pl.col(name), leaves[name]
        key = orjson.dumps(name).decode() + ":"
        if name in empty:
            pieces.append([pl.lit(key), column])
        elif series.dtype != pl.String:
            # JSON's own spelling of numbers and booleans.
            pieces.append([pl.lit(key), column.cast(pl.String)])
        elif escapes and series.str.contains(r'["\\\x00-\x1f]').any():
            # `{"key":"value"}`, escaped by polars; the key's own quotes start it and the
            # value's end it, so only the braces are stripped.
            encoded = pl.struct(column.alias(name)).struct.json_encode()
            text = encoded.str.strip_chars_start("{").str.strip_chars_end("}")
            pieces.append([pl.when(column.is_not_null()).then(text)])
        else:
            pieces.append([pl.lit(key + '"'), column, pl.lit('"')])
    return pieces


def _flat_object(pieces: list[list[pl.Expr]]) -> pl.Expr:
    """The pieces, all present, as one JSON object: one flat concatenation."""
    joined = [pl.lit("{")]
    for i, piece in enumerate(pieces):
        joined += [pl.lit(","), *piece] if i else piece
    return pl.concat_str([*joined, pl.lit("}")])


def _attrs(
    leaves: dict[str, pl.Series], names: list[str], escapes: bool, empty: set[str]
) -> pl.Expr:
    """The remaining fields as one JSON object per row; null where none remain.

    A field in `empty` holds the text `{}` where its line held an empty object, written
    as that object. Where no field is ever absent, one flat concatenation does it all.
    Otherwise each field is `"key":value`, null where the field is absent, and the pieces
    present are joined with commas (concat_str skips the nulls and their separators).
    """
    if not names:
        return pl.lit(None, dtype=pl.String)
    pieces = _attr_pieces(leaves, names, escapes, empty)
    if not any(leaves[name].has_nulls() for name in names):
        return _flat_object(pieces)
    body = pl.concat_str([pl.concat_str(p) for p in pieces], separator=",", ignore_nulls=True)
    present = pl.any_horizontal([pl.col(name).is_not_null() for name in names])
    return pl.when(present).then(pl.concat_str(pl.lit("{"), body, pl.lit("}")))


#: Above this many sets of fields present, `attrs` is built in one expression.
MAX_ATTR_SHAPES = 48


def _attrs_by_shape(
    table: pl.DataFrame,
    leaves: dict[str, pl.Series],
    names: list[str],
    escapes: bool,
    empty: set[str],
) -> pl.Series | None:
    """`_attrs` where fields are absent from some rows, built a set of present fields at
    a time; None where there are too many sets (or fields) for that to pay.

    Logs write a few shapes of line. The one expression pays for every field on every
    row, present or not (a log mixing shapes has dozens of fields, each in a few rows);
    the rows of one shape hold all of its fields, which one flat concatenation joins.
    """
    if not names or len(names) > 62 or all(not leaves[n].has_nulls() for n in names):
        return None
    present = np.zeros(table.height, dtype=np.int64)
    for bit, name in enumerate(names):
        present |= leaves[name].is_not_null().to_numpy().astype(np.int64) << bit
    shapes = np.unique(present)
    if len(shapes) > MAX_ATTR_SHAPES:
        return None
    pieces = dict(zip(names, _attr_pieces(leaves, names, escapes, empty), strict=True))
    texts, rows = [], []
    for shape in shapes[shapes != 0].tolist():
        fields = [name for bit, name in enumerate(names) if shape >> bit & 1]
        which = np.flatnonzero(present == shape)
        part = table.select(fields)[pl.Series(which)]
        texts.append(part.select(_flat_object([pieces[n] for n in fields])).to_series())
        rows.append(which)
    # Each row's text by its place among the shapes' texts; a row with no field, null.
    total = sum(len(r) for r in rows)
    place = np.full(table.height, total, dtype=np.int64)
    if rows:
        place[np.concatenate(rows)] = np.arange(total)
    nothing = pl.Series([None], dtype=pl.String)
    joined = pl.concat([*[t.cast(pl.String).alias("attrs") for t in texts], nothing.alias("attrs")])
    return joined.gather(pl.Series(place))


def _to_arrow(frame: pl.DataFrame, source: str, schema: pa.Schema) -> pa.Table:
    """The rows in `schema`: EVENTS_SCHEMA, or VIEW_SCHEMA, which spares copying the text."""
    views = schema == VIEW_SCHEMA
    level = pl.CompatLevel.newest() if views else pl.CompatLevel.oldest()
    # As views, one copy of `source` serves every row; and polars builds it without the
    # pandas import that `pa.scalar` of a Python string costs on its first call.
    arrow = frame.with_columns(pl.lit(source, pl.String).alias("source")).to_arrow(
        compat_level=level
    )
    columns = []
    rows = frame.height
    for field in schema:
        if field.name in arrow.column_names:
            array = arrow[field.name]
            if field.name == "ts":
                array = array.cast(pa.int64()).cast(field.type)
            columns.append(array.cast(field.type))
        else:
            columns.append(pa.nulls(rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)
