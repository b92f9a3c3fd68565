"""Differential fuzz target: the native uid memory (_uid_memory.c) against a model of it.

Each input is read as a program: a capacity, then claims and forgets of columns of uids
(hex digests, near-hex strings, short and long text, raw bytes; sliced, and now and then
with offsets outside the data). The model is what the memory promises, in Python sets:
two generations of capacity // 2 uids, a claim is fresh where the uid is in neither and
not earlier in its column, a generation that is full becomes the previous one and the
one before is dropped, a forgotten uid is in neither (it still counts towards its
generation's size), and a column refused for its offsets changes nothing. Every claim's
answer and the count of generations begun must agree; any sanitizer report is a
finding too.

Run by fuzz/run.sh; `fuzz/replay.sh uid_memory FILE...` replays inputs (docs/fuzzing.md).
"""

from __future__ import annotations

import struct
import sys

import atheris
import native

memory_module = native.load("_uid_memory")

HEX = "0123456789abcdef"
# Uids next to the memory's edge cases: the all-zero and all-ones digests (which an
# empty or a forgotten slot looks like), their neighbours, upper case, and lengths
# around 32.
POOL = [
    b"", b"a", b"b", "é".encode(), b"0" * 32, b"0" * 31 + b"1", b"1" + b"0" * 31,
    b"f" * 32, b"f" * 31 + b"e", b"F" * 32, HEX.encode() * 2, HEX.upper().encode() * 2,
    b"0" * 31, b"0" * 33, b"g" * 32, b"/" * 32, b":" * 32, b"`" * 32,
]


class Model:
    """The memory's promise, for `capacity` uids."""

    def __init__(self, capacity: int) -> None:
        self.per_generation = capacity // 2
        self.current: set[bytes] = set()
        self.previous: set[bytes] = set()
        self.added = 0  # claimed into the current generation, forgotten ones included
        self.rolls = 0

    def claim(self, uids: list[bytes]) -> list[bool]:
        fresh, seen = [], set()
        for uid in uids:
            fresh.append(uid not in self.current and uid not in self.previous
                         and uid not in seen)
            seen.add(uid)
        for uid, new in zip(uids, fresh, strict=True):
            if not new:
                continue
            if self.added >= self.per_generation:
                self.previous, self.current = self.current, set()
                self.added = 0
                self.rolls += 1
            self.current.add(uid)
            self.added += 1
        return fresh

    def forget(self, uids: list[bytes]) -> None:
        for uid in uids:
            self.current.discard(uid)
            self.previous.discard(uid)


def consume_uid(data: atheris.FuzzedDataProvider) -> bytes:
    kind = data.ConsumeIntInRange(0, 3)
    if kind == 0:
        return POOL[data.ConsumeIntInRange(0, len(POOL) - 1)]
    if kind == 1:  # a digest as the collector writes them
        return data.ConsumeBytes(16).hex().ljust(32, "0").encode()
    if kind == 2:
        return data.ConsumeBytes(data.ConsumeIntInRange(0, 40))
    base = bytearray(POOL[data.ConsumeIntInRange(0, len(POOL) - 1)] or b"0" * 32)
    base[data.ConsumeIntInRange(0, len(base) - 1)] = data.ConsumeIntInRange(0, 255)
    return bytes(base)


def column(uids: list[bytes], skip: int) -> tuple[list[int], bytes]:
    """Arrow's layout of a string column whose first `skip` values are sliced off."""
    data = b"junk" * skip + b"".join(uids)
    offsets = [4 * i for i in range(skip)]
    at = 4 * skip
    for uid in uids:
        offsets.append(at)
        at += len(uid)
    offsets.append(at)
    return offsets, data


def pack(offsets: list[int]) -> bytes:
    return struct.pack(f"<{len(offsets)}i", *offsets)


def spoil(data: atheris.FuzzedDataProvider, offsets: list[int], size: int,
          skip: int) -> bytes:
    """The offsets of the column, made wrong in one place, or cut short."""
    if len(offsets) == skip + 1 or data.ConsumeBool():
        return pack(offsets[:-1])
    at = data.ConsumeIntInRange(skip, len(offsets) - 1)
    bad = [-1, size + 1, 2**31 - 1, -(2**31)]
    if at > skip:
        bad.append(offsets[at - 1] - 1)  # before the value ahead of it
    offsets[at] = bad[data.ConsumeIntInRange(0, len(bad) - 1)]
    return pack(offsets)


def test_one_input(raw: bytes) -> None:
    data = atheris.FuzzedDataProvider(raw)
    capacity = data.ConsumeIntInRange(2, 48)
    memory, model = memory_module.UidMemory(capacity), Model(capacity)
    step = 0
    while data.remaining_bytes():
        step += 1
        op = data.ConsumeIntInRange(0, 9)
        uids = [consume_uid(data) for _ in range(data.ConsumeIntInRange(0, 2 * capacity))]
        skip = data.ConsumeIntInRange(0, 3)
        offsets, text = column(uids, skip)
        if op == 9:
            refused = spoil(data, offsets, len(text), skip)
            call = memory.claim if data.ConsumeBool() else memory.forget
            try:
                call(refused, text, skip, len(uids))
            except ValueError:
                pass
            else:
                raise AssertionError(f"step {step}: offsets outside the data were taken")
        elif op >= 7:
            memory.forget(pack(offsets), text, skip, len(uids))
            model.forget(uids)
        else:
            got = [bool(b) for b in memory.claim(pack(offsets), text, skip, len(uids))]
            want = model.claim(uids)
            if got != want:
                raise AssertionError(
                    f"step {step}: claim of {uids} (capacity {capacity}) gave {got}, "
                    f"the model {want}")
        if memory.rolls != model.rolls:
            raise AssertionError(f"step {step}: {memory.rolls} generations begun, "
                                 f"the model {model.rolls}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
