"""The collector's memory of written event_uids: what a resend is checked against."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
from collect_support import get_json, running, send_spans, source_digest
from native_support import require_native

from collectors.service.pipeline import RecentUids
from store.embedded import EmbeddedStore

HEX = [f"{i:032x}" for i in range(1, 9)]


def _claim(recent: RecentUids, uids: list[str]) -> list[bool]:
    return recent.claim(pa.chunked_array([pa.array(uids)])).tolist()


def test_the_native_memory_is_built_here() -> None:
    assert require_native("_uid_memory").UidMemory is not None


def test_the_native_memory_is_built_from_the_source_beside_it() -> None:
    built = require_native("_uid_memory")
    assert built.SOURCE_DIGEST == source_digest(built, "_uid_memory.c")


def test_uids_never_written_are_claim() -> None:
    assert _claim(RecentUids(), HEX[:3]) == [True, True, True]


def test_written_uids_are_not_claim() -> None:
    recent = RecentUids()
    recent.claim(pa.chunked_array([pa.array(HEX[:2])]))
    assert _claim(recent, HEX[:4]) == [False, False, True, True]


def test_a_column_in_several_chunks_is_claimed_as_one() -> None:
    column = pa.chunked_array([pa.array(HEX[:3]), pa.array([HEX[1], HEX[3]]).slice(0, 2)])
    assert RecentUids().claim(column).tolist() == [True, True, True, False, True]


def test_a_uid_repeated_within_a_batch_is_fresh_once() -> None:
    assert _claim(RecentUids(), ["a", "b", "a", "b", "c"]) == [True, True, False, False, True]


def test_uids_of_any_form_are_told_apart() -> None:
    recent = RecentUids()
    digest = "ab" * 16
    recent.claim(pa.chunked_array([pa.array(["bench-1", "line-7", digest.upper()])]))
    assert _claim(recent, ["bench-1", "bench-2", digest.upper(), digest]) == [
        False, True, False, True]


def test_hex_uids_that_differ_in_one_digit_are_told_apart() -> None:
    base = "0123456789abcdef" * 2
    variants = [base[:i] + d + base[i + 1:] for i in range(32) for d in "0123456789abcdef"]
    unique = sorted(set(variants))  # each position's own digit gives the base again
    assert all(_claim(RecentUids(), unique))


def test_characters_next_to_the_hex_digits_are_not_taken_for_them() -> None:
    """'/' ':' '@' 'G' '`' 'g' and upper case border or look like the digits: a uid with
    one of them is no hex uid, and no hex uid's key."""
    base = "0123456789abcdef" * 2
    odd = [base[:i] + c + base[i + 1:] for i in range(32) for c in "/:@AFG`g"]
    alike = [base[:i] + d + base[i + 1:] for i in range(32) for d in "09af"]
    recent = RecentUids()
    recent.claim(pa.chunked_array([pa.array(sorted(set(alike)))]))
    assert all(_claim(recent, odd))


def test_a_sliced_column_is_read_from_its_offset() -> None:
    recent = RecentUids()
    recent.claim(pa.chunked_array([pa.array(HEX).slice(4, 2)]))
    assert _claim(recent, HEX) == [True] * 4 + [False] * 2 + [True] * 2


def test_the_memory_keeps_half_its_capacity_at_least_and_forgets_older_uids() -> None:
    recent = RecentUids(capacity=100)
    uids = [f"uid-{i}" for i in range(1000)]
    for start in range(0, 1000, 10):
        recent.claim(pa.chunked_array([pa.array(uids[start : start + 10])]))
    fresh = _claim(recent, uids)
    assert not any(fresh[-50:])  # at least the last capacity / 2 are remembered
    assert all(fresh[:900])  # older ones are forgotten: the memory is bounded


def test_released_uids_can_be_claimed_again() -> None:
    recent = RecentUids()
    _claim(recent, HEX[:4])
    recent.release(pa.array(HEX[1:3]))
    assert _claim(recent, HEX[:4]) == [False, True, True, False]


def test_uids_probed_past_a_released_one_are_still_remembered() -> None:
    recent = RecentUids(capacity=8)  # a tiny table: most uids share a probe run
    uids = [f"uid-{i}" for i in range(4)]
    _claim(recent, uids)
    recent.release(pa.array(uids[:1]))
    assert _claim(recent, uids) == [True, False, False, False]


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_both_memories_give_the_same_answers(native: bool) -> None:
    recent = RecentUids()
    if not native:
        recent._native = None
    _claim(recent, ["a", "b"])
    recent.release(pa.array(["b"]))
    assert _claim(recent, ["a", "b", "c", "c"]) == [False, True, True, False]


def test_a_column_with_offsets_outside_its_data_claims_none_of_its_uids() -> None:
    memory = require_native("_uid_memory").UidMemory(1000)
    uids = [f"{i:032x}" for i in range(1, 101)]
    data = "".join(uids).encode()
    offsets = np.arange(0, 32 * 101, 32, dtype=np.int32)
    offsets[80] = len(data) + 1  # the 80th uid ends past the data
    with pytest.raises(ValueError, match="outside the data"):
        memory.claim(offsets.tobytes(), data, 0, 100)
    good = np.arange(0, 32 * 101, 32, dtype=np.int32)
    assert all(np.frombuffer(memory.claim(good.tobytes(), data, 0, 100), dtype=np.bool_))


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _uids(start: int, count: int) -> list[str]:
    return [f"{i:032x}" for i in range(start, start + count)]


def test_the_window_reaches_back_to_the_start_until_a_generation_is_dropped() -> None:
    require_native("_uid_memory")  # the Python memory counts uids, not generations
    clock = Clock(100.0)
    recent = RecentUids(capacity=8, clock=clock)
    _claim(recent, _uids(1, 4))
    clock.now = 130.0
    assert recent.window_seconds() == 30.0


def test_the_window_reaches_back_to_when_the_previous_generation_began() -> None:
    require_native("_uid_memory")
    clock = Clock()
    recent = RecentUids(capacity=8, clock=clock)  # generations of 4 uids
    for at, first in ((10.0, 1), (20.0, 5), (30.0, 9)):
        clock.now = at
        _claim(recent, _uids(first, 4))
    clock.now = 45.0
    assert recent.window_seconds() == 25.0  # the generation begun at 20 is still held
    assert _claim(recent, _uids(5, 4)) == [False] * 4  # claimed at 20: repeats
    assert _claim(recent, _uids(1, 4)) == [True] * 4  # claimed at 10: forgotten


def test_healthz_shows_the_memory_and_how_far_back_it_reaches(tmp_path) -> None:
    require_native("_uid_memory")
    started = time.monotonic()
    with running(EmbeddedStore(tmp_path / "store"), recent_uids=1000) as collector:
        assert send_spans(collector.http.port) == 200
        health = get_json(f"http://127.0.0.1:{collector.http.port}/healthz")
    lived = time.monotonic() - started
    assert health["recent_uids"] == 1000
    # The memory reaches back no further than the collector has lived.
    assert 0 <= health["dedupe_window_s"] <= lived


# Found by fuzzing against a model of the memory (fuzz/uid_memory_target.py).
def test_a_uid_repeated_in_a_column_after_a_generation_began_is_fresh_once() -> None:
    # capacity 2: one uid a generation, so a generation begins between the repeats.
    recent = RecentUids(capacity=2)
    assert _claim(recent, [HEX[0], "", "", ""]) == [True, True, False, False]


def test_a_uid_repeated_in_a_column_longer_than_the_memory_is_fresh_once() -> None:
    recent = RecentUids(capacity=4)
    uids = [f"u{i}" for i in range(10)]
    assert _claim(recent, [*uids, *uids]) == [True] * 10 + [False] * 10


@pytest.mark.parametrize("pair", [("0" * 32, "0" * 31 + "1"), ("f" * 32, "f" * 31 + "e")],
                         ids=["all zeros", "all ones"])
def test_the_digests_an_empty_or_forgotten_slot_spells_are_uids_of_their_own(
    pair: tuple[str, str],
) -> None:
    recent = RecentUids()
    assert _claim(recent, [pair[0]]) == [True]
    assert _claim(recent, [pair[1], pair[0]]) == [True, False]


def test_a_column_refused_for_its_offsets_forgets_nothing() -> None:
    memory = require_native("_uid_memory").UidMemory(1000)
    data = "".join(HEX).encode()
    offsets = np.arange(0, 32 * 9, 32, dtype=np.int32)
    assert all(np.frombuffer(memory.claim(offsets.tobytes(), data, 0, 8), dtype=np.bool_))
    spoiled = offsets.copy()
    spoiled[6] = spoiled[5] - 1  # the 6th uid ends before it begins
    with pytest.raises(ValueError, match="outside the data"):
        memory.forget(spoiled.tobytes(), data, 0, 8)
    assert not any(np.frombuffer(memory.claim(offsets.tobytes(), data, 0, 8), dtype=np.bool_))


def test_a_column_refused_for_its_offsets_leaves_the_generation_as_it_was() -> None:
    memory = require_native("_uid_memory").UidMemory(100)  # generations of 50 uids
    uids = _uids(1, 90)
    data = "".join(uids).encode()
    offsets = np.arange(0, 32 * 91, 32, dtype=np.int32)
    spoiled = offsets.copy()
    spoiled[36] = len(data) + 1  # past the first block of uids the claim reads
    with pytest.raises(ValueError, match="outside the data"):
        memory.claim(spoiled.tobytes(), data, 0, 40)
    claimed = memory.claim(offsets[40:].tobytes(), data, 0, 50)  # fills one generation
    assert all(np.frombuffer(claimed, dtype=np.bool_))
    assert memory.rolls == 0
