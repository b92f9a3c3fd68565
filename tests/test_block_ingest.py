"""The column-wise ingest path gives exactly the rows and rejections of the per-line path."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest
from support.json_lines_corpus import corpus
from support.same_rows import same_rows

from collectors import blocks, files
from collectors.arrow_batch import rows_to_table
from collectors.blocks import BlockDecoder
from collectors.jsonlines import decode_lines
from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import Normaliser
from collectors.uids import line_uids
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA

MAPPING_TOML = """
[fields]
ts = "when"
job_id = "task.uuid"
idempotency_key = ["order_id", "payment.key"]

[events]
"task-received" = "deliver"
"task-succeeded" = "ack"
"""


def row_path(lines: list[bytes], mapping: FieldMapping) -> tuple[pa.Table, list[str]]:
    numbered = list(enumerate(lines, start=1))
    decoded = decode_lines(numbered, Normaliser(mapping), "corpus")
    return rows_to_table(decoded.rows), [str(r) for r in decoded.rejected]


def assert_same_rows(got: pa.Table, want: pa.Table) -> None:
    assert got.schema == want.schema
    same_rows(got, want)


@pytest.mark.parametrize("mapped", [False, True])
def test_block_path_gives_the_rows_of_the_line_path(tmp_path: Path, mapped: bool) -> None:
    mapping = DEFAULT_MAPPING
    if mapped:
        (tmp_path / "map.toml").write_text(MAPPING_TOML)
        mapping = FieldMapping.load(tmp_path / "map.toml")
    lines = corpus()
    want, want_rejected = row_path(lines, mapping)
    result = BlockDecoder(mapping).decode(b"\n".join(lines) + b"\n", 1, "corpus")
    assert_same_rows(result.table, want)
    assert [str(r) for r in result.rejected] == want_rejected
    assert result.lines == len(lines)
    # Most lines are read column-wise; only the odd ones (and blocks polars refused) are not.
    assert result.per_line < len(lines) // 3


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("max_runs", [0, blocks.MAX_RUNS])
def test_rows_read_line_by_line_slot_in_between_in_line_order(
    monkeypatch, views: bool, max_runs: int
) -> None:
    """Sliced in runs or gathered (a block with many odd lines), plain text or views."""
    monkeypatch.setattr(blocks, "MAX_RUNS", max_runs)
    lines = corpus()
    want, _ = row_path(lines, DEFAULT_MAPPING)
    result = BlockDecoder(DEFAULT_MAPPING, views=views).decode(b"\n".join(lines), 1, "corpus")
    assert 0 < result.per_line < len(lines) // 3
    assert_same_rows(result.table.cast(EVENTS_SCHEMA), want)


def test_a_column_polars_would_coerce_goes_line_by_line() -> None:
    lines = [
        orjson.dumps({"ts": 1764504000 + i, "event": "ack", "job_id": f"j{i}"}) for i in range(300)
    ]
    lines += [orjson.dumps({"ts": 1764504000, "event": "ack", "job_id": 7, "n": "7"})]
    lines += [orjson.dumps({"ts": 1764504000, "event": "ack", "job_id": "j", "n": 7})]
    want, _ = row_path(lines, DEFAULT_MAPPING)
    result = BlockDecoder(DEFAULT_MAPPING).decode(b"\n".join(lines), 1, "corpus")
    assert_same_rows(result.table, want)


def test_a_lost_key_and_a_coercion_in_other_rows_do_not_cancel_out() -> None:
    # Row 301 loses a key to its explicit null (two `"` fewer), row 302 has a number read as
    # text (two `"` more): the block's totals of `"` agree, those of `:` do not.
    lines = [
        orjson.dumps({"ts": 1764504000 + i, "event": "ack", "job_id": f"j{i}", "n": "x"})
        for i in range(300)
    ]
    lines += [b'{"ts": 1764504000, "event": "ack", "job_id": "j", "n": "x", "gone": null}']
    lines += [b'{"ts": 1764504000, "event": "ack", "job_id": "j", "n": 7}']
    want, _ = row_path(lines, DEFAULT_MAPPING)
    result = BlockDecoder(DEFAULT_MAPPING).decode(b"\n".join(lines), 1, "corpus")
    assert_same_rows(result.table, want)
    assert result.per_line == 2


def test_event_uid_is_xxh3_128_of_the_stripped_line_on_both_paths() -> None:
    # What `xxhsum -H2` prints for "abc": the hash is the standard one, in canonical form.
    assert line_uids([b"abc"]) == ["06b05ab6733a618578af5f94892f3950"]
    line = b'{"ts": 1764504000, "event": "ack", "job_id": "j"}'
    want = "0159e81eddc2f978aee287d130efa958"
    lines = [b"  " + line + b"\r", line, b"[1]"]
    per_line = row_path(lines, DEFAULT_MAPPING)[0]["event_uid"].to_pylist()
    block = BlockDecoder(DEFAULT_MAPPING).decode(b"\n".join(lines), 1, "corpus")
    assert per_line == block.table["event_uid"].to_pylist() == [want, want]


def test_event_uid_is_the_line_paths_so_reingest_collapses(tmp_path: Path) -> None:
    lines = corpus(500)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    store = EmbeddedStore(tmp_path / "store")
    files.ingest_files([str(path)], store)
    table, _ = row_path(lines, DEFAULT_MAPPING)
    store.write(table)
    distinct = store.execute("SELECT count(DISTINCT event_uid) AS n FROM events")["n"][0]
    assert distinct == table.num_rows


def test_ingest_in_worker_processes_keeps_line_numbers(tmp_path: Path, monkeypatch) -> None:
    lines = corpus(3000, seed=5)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(files, "BLOCK_BYTES", 16_384)  # many blocks, so the pool starts
    monkeypatch.setattr(files, "_workers", lambda: 2)
    store = EmbeddedStore(tmp_path / "store")
    report = files.ingest_files([str(path)], store)
    want, want_rejected = row_path(lines, DEFAULT_MAPPING)
    assert [str(r) for r in report.rejected] == [
        r.replace("corpus:", f"{path}:") for r in want_rejected
    ]
    assert report.lines == len(lines) and report.rows == want.num_rows
    stored = store.arrow("SELECT * FROM events ORDER BY event_uid")
    expected = want.sort_by("event_uid").drop_columns(["source"])
    assert_same_rows(stored.drop_columns(["source"]).cast(expected.schema), expected)


def test_workers_hand_rows_back_to_a_store_they_cannot_write(tmp_path: Path, monkeypatch):
    # chDB has no segments a worker process could write: the pool hands its rows back.
    lines = corpus(1500, seed=6)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(files, "BLOCK_BYTES", 16_384)
    monkeypatch.setattr(files, "_workers", lambda: 2)
    store = ChdbStore(str(tmp_path / "chdb"))
    report = files.ingest_files([str(path)], store)
    want, _ = row_path(lines, DEFAULT_MAPPING)
    stored = store.arrow("SELECT event_uid FROM events")["event_uid"].to_pylist()
    uids = set(want["event_uid"].to_pylist())
    assert report.rows == want.num_rows
    assert set(stored) == uids
    assert report.already_stored == want.num_rows - len(uids)  # the corpus repeats a line


def test_line_views_hold_the_bytes_of_their_ranges() -> None:
    rng = random.Random(3)
    block = bytes(rng.randrange(256) for _ in range(2000))
    starts = np.array(sorted(rng.sample(range(2000), 300)), dtype=np.int64)
    ends = np.minimum(starts + np.array([rng.randrange(30) for _ in starts]), 2000)
    views = blocks._views(block, starts, ends).to_pylist()
    assert views == [block[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]


def test_workers_read_a_file_without_a_final_newline_to_its_end(tmp_path: Path, monkeypatch):
    lines = corpus(400, seed=8)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines))
    monkeypatch.setattr(files, "BLOCK_BYTES", 4_096)
    monkeypatch.setattr(files, "_workers", lambda: 2)
    report = files.ingest_files([str(path)], EmbeddedStore(tmp_path / "store"))
    want, want_rejected = row_path(lines, DEFAULT_MAPPING)
    assert report.lines == len(lines) and report.rows == want.num_rows
    assert [str(r) for r in report.rejected] == [
        r.replace("corpus:", f"{path}:") for r in want_rejected
    ]


def test_a_block_read_earlier_keeps_its_bytes_when_the_next_is_read(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)) * 64)
    first = files._read_block(str(path), 10, 3000)
    second = files._read_block(str(path), 500, 5000)  # longer: the buffer grows
    third = files._read_block(str(path), 7, 100)  # shorter: it shrinks
    data = path.read_bytes()
    assert (first, second, third) == (data[10:3010], data[500:5500], data[7:107])


def test_otlp_words_are_found_wherever_they_start() -> None:
    rng = random.Random(4)
    pieces = [b"resource", b"Spans", b"Logs", b"_spans", b"S", b"L", b"_s", b"x", b"\n"]
    words = re.compile(rb"resource(?:Spans|Logs|_spans)")
    for _ in range(2000):
        text = b"".join(rng.choice(pieces) for _ in range(rng.randrange(40)))
        found = blocks._otlp_words(np.frombuffer(text, dtype=np.uint8)).tolist()
        assert {m.start() for m in words.finditer(text)} <= set(found)
        assert all(
            text[at : at + 9] in (b"resourceS", b"resourceL") or text[at : at + 10] == b"resource_s"
            for at in found
        )


def _decoded_as_line_path(lines: list[bytes]) -> blocks.BlockResult:
    """The block path's result, after checking it against the line path's."""
    want, want_rejected = row_path(lines, DEFAULT_MAPPING)
    result = BlockDecoder(DEFAULT_MAPPING).decode(b"\n".join(lines) + b"\n", 1, "corpus")
    assert_same_rows(result.table, want)
    assert [str(r) for r in result.rejected] == want_rejected
    return result


def _ack(i: int, **fields: object) -> dict:
    return {"ts": 1764504000 + i, "event": "ack", "job_id": f"{i:x}f00d-{i}"} | fields


def test_empty_objects_are_kept_in_attrs_column_wise() -> None:
    lines = [orjson.dumps(_ack(i, attrs={})) for i in range(200)]
    lines += [orjson.dumps(_ack(i, attrs={"x": i, "deep": {"er": {}}})) for i in range(100)]
    lines += [orjson.dumps(_ack(i, attrs={"x": i}, meta={})) for i in range(100)]
    result = _decoded_as_line_path(lines)
    assert result.per_line == 0
    assert orjson.loads(result.table["attrs"][0].as_py()) == {"attrs": {}}


def test_attrs_present_in_some_rows_are_joined_column_wise() -> None:
    """Text that must be escaped, numbers and empty objects, each absent from some rows."""
    lines = [
        orjson.dumps(
            _ack(i)
            | ({"msg": f'said "hi"\n\\ {i}: ✓'} if i % 2 else {})
            | ({"n": i} if i % 3 else {})
            | ({"meta": {}} if i % 5 == 0 else {})
        )
        for i in range(300)
    ]
    result = _decoded_as_line_path(lines)
    assert result.per_line == 0
    assert result.table["attrs"][1].as_py() is not None


def test_an_empty_object_where_a_field_is_read_goes_line_by_line() -> None:
    lines = [orjson.dumps(_ack(i, attrs={})) for i in range(300)]
    lines += [
        b'{"ts": {}, "event": "ack", "job_id": "j"}',
        b'{"ts": 1764504000, "event": {}, "job_id": "j"}',
        b'{"ts": 1764504000, "event": "ack", "job_id": {}}',
        b'{"ts": 1764504000, "event": "ack", "job_id": "j", "attrs": {"x": null}}',
        b'{"ts": 1764504000, "event": "ack", "job_id": "j", "attrs": {}, "attrs.y": 1}',
    ]
    result = _decoded_as_line_path(lines)
    assert [r.reason for r in result.rejected] == [
        "not a timestamp: {}",
        "unknown event '{}'",
        "job_id must be a string, got dict",
    ]


def test_timestamps_written_as_numbers_and_as_text_in_one_block_are_read_column_wise() -> None:
    stamps = [1764504000, 1764504000.25, 1764504000123, 1764504000123456, 1764504000123456789]
    stamps += ["2025-11-30T12:00:00Z", "2025-11-30T14:00:00.5+02:00", "1764504000"]
    lines = [orjson.dumps(_ack(i, ts=stamps[i % len(stamps)])) for i in range(800)]
    assert _decoded_as_line_path(lines).per_line == 0


def test_rows_are_told_apart_by_totals_and_a_few_counted_rows(monkeypatch) -> None:
    """Digit timestamps beside text ones, text values that look like numbers, an array and
    a number in a text column: only the array's, the number's and the row whose digit
    timestamp sits beside a text that looks like a number go line by line, and no line's
    marks but those of the few suspect rows are counted."""

    def every_line(_: object) -> None:
        raise AssertionError("every line's marks were counted")

    monkeypatch.setattr(blocks.Lines, "marks", every_line)
    stamps = [1764504000, 1764504000.25, 1764504000123, "2025-11-30T12:00:00Z"]
    lines = [orjson.dumps(_ack(i, ts=stamps[i % len(stamps)], n="x")) for i in range(800)]
    lines[7] = orjson.dumps(_ack(7, ts=1764504007, n="962652422488258e-6796"))
    lines[8] = orjson.dumps(_ack(8, ts="2025-11-30T12:00:08Z", n="5"))
    lines[9] = orjson.dumps(_ack(9, ts=1764504009, tags=[1, 2]))
    lines[10] = orjson.dumps(_ack(10, ts=1764504010, n=5))
    result = _decoded_as_line_path(lines)
    assert result.per_line == 3


def test_a_quoted_digit_timestamp_leaves_the_totals_unsure_and_rows_are_counted() -> None:
    """Digits quoted in one line and not in others: the totals cannot tell which, so every
    line is counted; a number in a text column still goes line by line."""
    lines = [orjson.dumps(_ack(i, ts=1764504000 + i, n="x")) for i in range(400)]
    lines[3] = orjson.dumps(_ack(3, ts="1764504003", n="x"))
    lines[4] = orjson.dumps(_ack(4, ts="2025-11-30T12:00:04Z", n=5))
    result = _decoded_as_line_path(lines)
    assert result.per_line == 1


def test_a_number_read_as_text_beside_a_timestamp_read_as_text_goes_line_by_line() -> None:
    lines = [orjson.dumps(_ack(i, ts="2025-11-30T12:00:00Z", n="x")) for i in range(300)]
    lines += [
        orjson.dumps(_ack(1, ts=1764504000, n=5)),  # both unquoted
        orjson.dumps(_ack(2, ts="1764504000", n=5)),  # the number's quotes as many as the ts's
        orjson.dumps(_ack(3, ts=1764504000, n=True)),
        orjson.dumps(_ack(4, ts=1764504000, n={"a": 1})),
    ]
    result = _decoded_as_line_path(lines)
    assert result.per_line == 4
    assert orjson.loads(result.table["attrs"][-3].as_py()) == {"n": 5}


def test_surrogate_pairs_are_read_column_wise_and_a_lone_one_is_refused() -> None:
    lines = [_ack_line(i, b'"\\ud83d\\ude80 \\u00e9 \\"q\\""') for i in range(300)]
    lines += [_ack_line(1, b'"\\ud83d"'), _ack_line(2, b'"\\ud83dx\\ude80"')]
    result = _decoded_as_line_path(lines)
    assert len(result.rejected) == 2 and result.per_line == 2


def _ack_line(i: int, value: bytes) -> bytes:
    return orjson.dumps(_ack(i))[:-1] + b', "msg": ' + value + b"}"


def test_escapes_of_marks_and_surrogates_anywhere_give_the_line_paths_rows() -> None:
    """`\u0022`/`\u003a` in either case, paired and lone surrogates, an escaped backslash
    before `u0022`, cut escapes: each line's fate is the line path's."""
    rng = random.Random(3)
    pieces = [
        r"\u0022", r"\u003a", r"\u003A", r"\u003b", r"\uD83D", r"\ud83d\ude80", r"\\u0022",
        r"\udc00", r"\uDA00x", r"\u00e9", "a", ":", r"\n",
    ]  # fmt: skip
    lines = []
    for i in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
        lines.append(orjson.dumps(_ack(i))[:-1] + b', "msg": "' + text.encode() + b'"}')
    _decoded_as_line_path(lines)


def test_crlf_line_ends_are_cut_off_column_wise() -> None:
    lines = [orjson.dumps(_ack(i)) + b"\r" for i in range(300)]
    lines += [orjson.dumps(_ack(1)) + b" \r", b"\r", b" " + orjson.dumps(_ack(2)) + b"\r"]
    assert _decoded_as_line_path(lines).per_line == 0


def test_escapes_split_across_scan_pieces_give_the_line_paths_rows(monkeypatch) -> None:
    """A `\\u` pair, `{` or mark that straddles two of the scan's pieces is found as
    inside one."""
    monkeypatch.setattr(blocks, "SCAN_BYTES", 7)
    rng = random.Random(5)
    pieces = [r"\u0022", r"\u003a", r"\ud83d\ude80", r"\uD83D", r"\\u0022", r"\n", "a", ":"]
    lines = []
    for i in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(5)))
        lines.append(orjson.dumps(_ack(i))[:-1] + b', "msg": "' + text.encode() + b'"}')
    lines += [orjson.dumps(_ack(1, d={"a": [1]})), b'{"x":' * 70 + b"1" + b"}" * 70]
    _decoded_as_line_path(lines)


def test_a_value_may_be_a_coercion_where_the_pattern_matches_it() -> None:
    """The look at a value's first two bytes drops only values the pattern refuses."""
    import polars as pl

    from collectors import columnar

    rng = random.Random(7)
    parts = [*"0123456789-+.eEtfn{[x\"é ", "true", "null", "1e5", "-0.5", "0c5b-0", "12:00"]
    values = [
        None if rng.random() < 0.2 else "".join(rng.choice(parts) for _ in range(rng.randrange(5)))
        for _ in range(3000)
    ]
    column = pl.Series("v", values, dtype=pl.String)
    pattern = column.str.contains(columnar._COERCED) | column.is_in(columnar._COERCED_WORDS)
    want = pattern.fill_null(False).to_numpy()
    assert (columnar._maybe_coerced(column) == want).all()
    known = np.array([rng.random() < 0.3 for _ in values])
    assert (columnar._maybe_coerced(column, {}, known) == (want & ~known)).all()


def test_attrs_built_shape_by_shape_are_those_of_the_one_expression() -> None:
    import polars as pl

    from collectors import columnar

    rng = random.Random(11)
    rows = 500
    columns = {
        "msg": [rng.choice(["plain", 'a "q"', "tab\there", "é"]) for _ in range(rows)],
        "n": [rng.randrange(-5, 5) for _ in range(rows)],
        "f": [rng.random() * 100 for _ in range(rows)],
        "ok": [rng.random() < 0.5 for _ in range(rows)],
        "hollow": ["{}"] * rows,
        "a.b": [f"v{i}" for i in range(rows)],
    }
    sometimes = {"msg", "f", "hollow", "a.b"}  # 16 sets of fields present, at most
    leaves = {
        name: pl.Series(
            name, [v if name not in sometimes or rng.random() < 0.6 else None for v in values]
        )
        for name, values in columns.items()
    }
    table = pl.DataFrame(list(leaves.values()))
    for names in (list(leaves), ["msg", "hollow"], ["f"]):
        for escapes in (True, False):
            want = table.select(columnar._attrs(leaves, names, escapes, {"hollow"})).to_series()
            got = columnar._attrs_by_shape(table, leaves, names, escapes, {"hollow"})
            assert got is not None
            assert got.to_list() == want.to_list()
    assert columnar._attrs_by_shape(table, leaves, ["n", "ok"], True, set()) is None
    # 256 sets of fields present: too many to build one by one.
    many = {
        f"k{i}": pl.Series(f"k{i}", [rng.choice([1, None]) for _ in range(rows)]) for i in range(8)
    }
    wide = pl.DataFrame(list(many.values()))
    assert columnar._attrs_by_shape(wide, many, list(many), True, set()) is None


def test_line_views_of_short_and_long_lines_hold_their_bytes() -> None:
    block = b"".join(orjson.dumps({"k": "v" * n}) + b"\n" for n in range(0, 30))
    lines = blocks.Lines(block)
    kinds = blocks._classify(lines)
    views = blocks._views(block, kinds.starts, kinds.ends)
    assert views.to_pylist() == [lines[i] for i in range(len(lines))]


def test_a_bare_cr_ends_no_line_on_either_path() -> None:
    from collectors.decoders.json_lines import LinesReference

    body = b'{"ts": 1764504000,\r"event": "ack", "job_id": "j1"}\r\n{"ts": 1764504001}\n'
    by_line = LinesReference().decode(body, Normaliser(), "f")
    by_block = BlockDecoder(DEFAULT_MAPPING).decode(body, 1, "f")
    for result in (by_line, by_block):
        assert result.lines == 2
        assert result.table["job_id"].to_pylist() == ["j1"]
        assert [r.where for r in result.rejected] == ["f:2"]
