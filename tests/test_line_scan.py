"""The native block scan (`collectors/_line_scan.c`) finds exactly what the NumPy
reference (`blocks.scan_reference`) finds, on any bytes."""

from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest
from collect_support import source_digest
from native_support import require_native

from collectors import blocks

native = require_native("_line_scan")

#: The bytes the scan looks for, the digits of the escapes it tells apart, and filler.
ALPHABET = list(b'\\u\\udD89aAbBcCeEfF0023:"{[\r\n\x01\x1f x\x7f\xc3\xa9')


def _fields(found: blocks.Scanned) -> dict[str, object]:
    return {name: (value.tolist() if isinstance(value, np.ndarray) else value)
            for name, value in vars(found).items()}


def _native(block: bytes) -> dict[str, object]:
    *positions, backslashes, quotes, colons = native.scan(block)
    arrays = [np.frombuffer(found, dtype=np.int64) for found in positions]
    return _fields(blocks.Scanned(*arrays, backslashes, quotes, colons))


def _reference(block: bytes) -> dict[str, object]:
    return _fields(blocks.scan_reference(np.frombuffer(block, dtype=np.uint8)))


def test_the_native_scan_is_built_from_the_source_beside_it() -> None:
    assert native.SOURCE_DIGEST == source_digest(native, "_line_scan.c")


def test_blocks_are_scanned_natively_where_it_is_built() -> None:
    assert blocks._line_scan is native


@pytest.mark.parametrize(
    ("block", "field", "want"),
    [
        (b'{"a": "\\u0022"}\n', "mark_escapes", [7]),
        (b'{"a": "\\u003A\\u003a"}\n', "mark_escapes", [7, 13]),
        (b'{"a": "\\u0021"}\n', "mark_escapes", []),
        (b'{"a": "\\ud83d"}\n', "lone_highs", [7]),
        (b'{"a": "\\ud83d\\ude00"}\n', "lone_highs", []),
        (b'{"a": "\\uDBFF\\uDC00"}\n', "lone_highs", []),
        (b'{"a": "\\udc00"}\n', "lone_highs", []),  # a lone low half: polars refuses it
        (b'{"a": 1}\r\n{"b": 2}\r', "control", []),  # a line's own CR
        (b'{"a": "\r\x07"}\n', "control", [7, 8]),
        (b"\\u002", "mark_escapes", []),  # the digits run past the block
        (b'{"a": [{"b": "\\\\"}]}', "openers", [0, 6, 7]),
    ],
)
def test_what_the_scan_finds(block: bytes, field: str, want: list[int]) -> None:
    assert _native(block)[field] == want
    assert _reference(block)[field] == want


@pytest.mark.parametrize("seed", range(40))
def test_random_bytes_scan_as_the_reference_scans_them(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([0, 1, 5, 15, 16, 17, 31, 33, 200, 5000])
    block = bytes(rng.choice(ALPHABET) for _ in range(size))
    assert _native(block) == _reference(block)


def test_escapes_across_the_references_pieces_scan_alike(monkeypatch) -> None:
    # The reference scans a megabyte at a time; pieces of 7 bytes put every escape and
    # CR LF across a piece's edge somewhere.
    monkeypatch.setattr(blocks, "SCAN_BYTES", 7)
    rng = random.Random(3)
    block = bytes(rng.choice(ALPHABET) for _ in range(3000))
    assert _native(block) == _reference(block)


def test_log_lines_scan_as_the_reference_scans_them() -> None:
    rng = random.Random(5)
    lines = []
    for i in range(2000):
        record = {"ts": 1764504000 + i, "event": "ack", "job_id": f"j{i}",
                  "msg": "".join(rng.choice("aé☃\"\\:\n{[😀") for _ in range(rng.randrange(30)))}
        # As orjson writes it (UTF-8) and as json.dumps does (escapes, surrogate pairs).
        line = orjson.dumps(record) if i % 2 else json.dumps(record).encode()
        lines.append(line + rng.choice([b"\n", b"\r\n"]))
    block = b"".join(lines)
    assert _native(block) == _reference(block)


def test_a_block_decodes_alike_without_the_native_scan(monkeypatch) -> None:
    from collectors.mapping import FieldMapping

    lines = [orjson.dumps({"ts": 1764504000 + i, "event": "ack", "job_id": f"j{i}",
                           "note": "é\\u0022" if i % 3 else "\x07"}) for i in range(300)]
    block = b"\r\n".join(lines) + b'\n{"ts": 1, "event": "ack", "job_id": "\\ud800"}\n'
    decoder = blocks.BlockDecoder(FieldMapping())
    native_result = decoder.decode(block, 1, "f")
    monkeypatch.setattr(blocks, "_line_scan", None)
    numpy_result = decoder.decode(block, 1, "f")
    assert native_result.table.equals(numpy_result.table)
    assert [str(r) for r in native_result.rejected] == [str(r) for r in numpy_result.rejected]
    assert native_result.table.num_rows == 300 and len(native_result.rejected) == 1
