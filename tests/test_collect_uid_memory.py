"""The collector's memory of written event_uids: what a resend is checked against."""

from __future__ import annotations

import pyarrow as pa

from collectors.service.pipeline import RecentUids, UidMemory

HEX = [f"{i:032x}" for i in range(1, 9)]


def _fresh(recent: RecentUids, uids: list[str]) -> list[bool]:
    return recent.fresh(pa.chunked_array([pa.array(uids)])).tolist()


def test_the_native_memory_is_built_here() -> None:
    assert UidMemory is not None


def test_uids_never_written_are_fresh() -> None:
    assert _fresh(RecentUids(), HEX[:3]) == [True, True, True]


def test_written_uids_are_not_fresh() -> None:
    recent = RecentUids()
    recent.add_all(pa.chunked_array([pa.array(HEX[:2])]))
    assert _fresh(recent, HEX[:4]) == [False, False, True, True]


def test_a_uid_repeated_within_a_batch_is_fresh_once() -> None:
    assert _fresh(RecentUids(), ["a", "b", "a", "b", "c"]) == [True, True, False, False, True]


def test_uids_of_any_form_are_told_apart() -> None:
    recent = RecentUids()
    digest = "ab" * 16
    recent.add_all(pa.chunked_array([pa.array(["bench-1", "line-7", digest.upper()])]))
    assert _fresh(recent, ["bench-1", "bench-2", digest.upper(), digest]) == [
        False, True, False, True]


def test_a_sliced_column_is_read_from_its_offset() -> None:
    recent = RecentUids()
    recent.add_all(pa.chunked_array([pa.array(HEX).slice(4, 2)]))
    assert _fresh(recent, HEX) == [True] * 4 + [False] * 2 + [True] * 2


def test_the_memory_keeps_half_its_capacity_at_least_and_forgets_older_uids() -> None:
    recent = RecentUids(capacity=100)
    uids = [f"uid-{i}" for i in range(1000)]
    for start in range(0, 1000, 10):
        recent.add_all(pa.chunked_array([pa.array(uids[start : start + 10])]))
    fresh = _fresh(recent, uids)
    assert not any(fresh[-50:])  # at least the last capacity / 2 are remembered
    assert all(fresh[:900])  # older ones are forgotten: the memory is bounded
