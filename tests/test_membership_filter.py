"""The lookup index's membership filter: never hides a value, rules most absent ones out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from store.lookup_index import INDEX_ROW_GROUP, INDEX_SCHEMA, LookupIndex, _write_merged, filter_of
from store.membership_filter import MembershipFilter, value_hashes, write_filter

PRESENT = [f"key-{i:06d}" for i in range(0, 40_000, 2)]
ABSENT = [f"key-{i:06d}" for i in range(1, 40_000, 2)]  # between the present ones


@pytest.fixture
def written(tmp_path: Path) -> Path:
    path = tmp_path / "values.filter"
    write_filter(path, pa.array(PRESENT))
    return path


def test_every_written_value_may_be_held(written: Path) -> None:
    opened = MembershipFilter.open(written)
    assert opened is not None
    assert opened.may_hold(value_hashes(PRESENT)).all()


def test_almost_every_absent_value_is_ruled_out(written: Path) -> None:
    opened = MembershipFilter.open(written)
    assert opened is not None
    false_positives = opened.may_hold(value_hashes(ABSENT)).mean()
    assert false_positives < 0.02


def test_a_filter_built_with_another_hash_function_is_not_used(written: Path) -> None:
    array = np.load(written)
    array[3] ^= np.uint64(1)  # the check word another DuckDB's hash would have written
    with open(written, "wb") as handle:
        np.save(handle, array)
    assert MembershipFilter.open(written) is None


def test_a_truncated_filter_is_not_used(written: Path) -> None:
    written.write_bytes(written.read_bytes()[:200])
    assert MembershipFilter.open(written) is None


def _index(tmp_path: Path) -> Path:
    """An index over PRESENT, one segment, in several row groups."""
    table = pa.table(
        {
            "lookup": PRESENT,
            "segment": ["day=2025-11-30/a.parquet"] * len(PRESENT),
            "row_group": [i // 100 for i in range(len(PRESENT))],
        },
        schema=INDEX_SCHEMA,
    )
    entries = tmp_path / "entries.parquet"
    pq.write_table(table, entries)
    final = tmp_path / "lookup-1.parquet"
    _write_merged([entries], ["day=2025-11-30/a.parquet"], final, "256MB", tmp_path / "spill")
    assert len(PRESENT) > 2 * INDEX_ROW_GROUP
    return final


def test_looking_up_absent_values_decodes_almost_no_index_row_group(tmp_path: Path) -> None:
    index = LookupIndex(_index(tmp_path))
    try:
        assert index.find(ABSENT[:2000]) == set()
        assert len(index._groups) <= 1  # a false positive or none, of 5 row groups
        assert index.find(["key-000100"]) == {("day=2025-11-30/a.parquet", 0)}
    finally:
        index.close()


def test_an_index_whose_filter_is_gone_still_finds_its_values(tmp_path: Path) -> None:
    path = _index(tmp_path)
    named = filter_of(path)
    assert named is not None
    named.unlink()
    index = LookupIndex(path)
    try:
        assert index.filter is None
        assert index.find(["key-039998", "key-000001"]) == {("day=2025-11-30/a.parquet", 199)}
    finally:
        index.close()
