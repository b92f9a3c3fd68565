"""The ordered splice the duplicates answer's caches share (derive/ordered.py): new rows put
in their places among rows ordered by (first, key), the result cut into runs to copy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from derive import ordered


def spliced(kept: list[tuple[int, str]], new: list[tuple[int, str]]) -> list[str]:
    """The keys of `kept` (in order) and `new` (in order) spliced by (first, key)."""
    first = np.array([f for f, _ in kept], dtype=np.int64)
    keys = [k for _, k in kept]
    at = ordered.places(first, np.array([f for f, _ in new], dtype=np.int64),
                        [k for _, k in new], lambda lo, hi: keys[lo:hi])
    order = ordered.merged(np.arange(len(kept)), at, len(kept) + np.arange(len(new)))
    every = keys + [k for _, k in new]
    return [every[i] for i in order.tolist()]


def test_a_new_row_that_ties_on_first_goes_among_the_tied_rows_by_key() -> None:
    kept = [(5, "b"), (10, "b"), (10, "d"), (10, "f"), (20, "a")]
    assert spliced(kept, [(10, "a"), (10, "c"), (10, "e"), (10, "g")]) == [
        "b", "a", "b", "c", "d", "e", "f", "g", "a"]


def test_new_rows_before_every_kept_row_come_first() -> None:
    assert spliced([(10, "a"), (20, "b")], [(1, "y"), (2, "z")]) == ["y", "z", "a", "b"]


def test_new_rows_after_every_kept_row_come_last() -> None:
    assert spliced([(10, "a"), (20, "b")], [(20, "c"), (30, "a")]) == ["a", "b", "c", "a"]


def test_no_kept_rows_leaves_the_new_rows_in_their_order() -> None:
    assert spliced([], [(3, "b"), (3, "c"), (7, "a")]) == ["b", "c", "a"]


def test_no_new_rows_leaves_the_kept_rows_as_they_are() -> None:
    assert spliced([(1, "a"), (1, "b"), (2, "a")], []) == ["a", "b", "a"]


def test_a_missing_first_comes_after_every_present_one_and_ties_by_key() -> None:
    column = pa.chunked_array([[5, None], [2, None]], pa.int64())
    firsts = ordered.firsts(column)
    assert firsts.tolist() == [5, ordered.MISSING, 2, ordered.MISSING]
    kept = [(2, "a"), (ordered.MISSING, "b"), (ordered.MISSING, "d")]
    assert spliced(kept, [(9, "z"), (ordered.MISSING, "a"), (ordered.MISSING, "c")]) == [
        "a", "z", "a", "b", "c", "d"]


def test_firsts_of_timestamps_are_their_integers_and_of_nothing_an_empty_array() -> None:
    stamps = pa.array([1_000_000, 2_000_000], pa.timestamp("us", tz="UTC"))
    assert ordered.firsts(stamps).tolist() == [1_000_000, 2_000_000]
    assert ordered.firsts(pa.chunked_array([], pa.int64())).tolist() == []


def test_kept_keys_are_read_only_where_firsts_tie() -> None:
    asked: list[tuple[int, int]] = []

    def keys(lo: int, hi: int) -> list[str]:
        asked.append((lo, hi))
        return ["a", "c", "e", "g"][lo:hi]

    at = ordered.places(np.array([1, 2, 2, 3]), np.array([0, 2, 4]), ["x", "d", "x"], keys)
    assert at.tolist() == [0, 2, 4]
    assert asked == [(1, 3)]


def test_new_rows_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="out of order"):
        ordered.merged(np.arange(3), np.array([2, 1]), np.array([3, 4]))


def test_runs_are_the_ranges_of_consecutive_ids() -> None:
    starts, stops = ordered.runs(np.array([0, 1, 2, 7, 3, 4, 8, 9]))
    assert list(zip(starts.tolist(), stops.tolist(), strict=True)) == [
        (0, 3), (7, 8), (3, 5), (8, 10)]


def test_no_run_crosses_the_seam_between_two_sources() -> None:
    starts, stops = ordered.runs(np.array([0, 1, 2, 3, 4]), seam=3)
    assert list(zip(starts.tolist(), stops.tolist(), strict=True)) == [(0, 3), (3, 5)]


def test_an_empty_order_has_no_runs() -> None:
    starts, stops = ordered.runs(np.zeros(0, dtype=np.int64), seam=0)
    assert starts.tolist() == [] and stops.tolist() == []


def test_a_splice_is_a_sort_of_both() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        size = int(rng.integers(0, 30))
        firsts = rng.integers(0, 6, size).tolist()
        firsts = [ordered.MISSING if f == 5 else f for f in firsts]
        every = sorted({(f, f"k{rng.integers(0, 40):02d}") for f in firsts})
        new_at = rng.random(len(every)) < 0.3
        kept = [row for row, fresh in zip(every, new_at, strict=True) if not fresh]
        new = [row for row, fresh in zip(every, new_at, strict=True) if fresh]
        assert spliced(kept, new) == [k for _, k in every]
