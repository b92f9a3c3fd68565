"""Differential fuzz target: the native block scan (_line_scan.c) against its NumPy
reference (`collectors.blocks.scan_reference`).

Each input is a block of bytes as it is, and again with its bytes mapped onto the few
that the scan tells apart (backslashes, `u`, the digits of the escapes that spell `"`
and `:` or a surrogate half, `{`, `[`, quotes, colons, CR, LF, other control bytes), so
that escapes, surrogate pairs and CR LF line ends straddle the 16-byte vectors and the
block's end far more often than random bytes would. Every position list and every count
must agree; any sanitizer report is a finding too.

Run by fuzz/run.sh; `fuzz/replay.sh line_scan FILE...` replays inputs (docs/fuzzing.md).
"""

from __future__ import annotations

import sys

import atheris
import native
import numpy as np

scan_module = native.load("_line_scan")

with atheris.instrument_imports(include=["collectors"]):
    from collectors import blocks

ALPHABET = b'\\u\\udD89aAbBcCeEfF0023:"{[\r\n\x01\x1f x'


def fields(found: blocks.Scanned) -> dict[str, object]:
    return {name: (value.tolist() if isinstance(value, np.ndarray) else value)
            for name, value in vars(found).items()}


def check(block: bytes) -> None:
    *positions, backslashes, quotes, colons = scan_module.scan(block)
    arrays = [np.frombuffer(found, dtype=np.int64) for found in positions]
    got = fields(blocks.Scanned(*arrays, backslashes, quotes, colons))
    want = fields(blocks.scan_reference(np.frombuffer(block, dtype=np.uint8)))
    if got != want:
        differ = [name for name in want if got[name] != want[name]]
        raise AssertionError(f"{differ} differ on {block!r}: native {got}, reference {want}")


def test_one_input(raw: bytes) -> None:
    check(raw)
    check(bytes(ALPHABET[b % len(ALPHABET)] for b in raw))


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
