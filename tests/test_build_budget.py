"""A full build over more events than its DuckDB may hold spills and finishes, with every
derived table and kept answer the same as under a large budget."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from support.derived_rows import state
from support.model_batches import model_batches

from queries import derived
from store import memory
from store.embedded import EmbeddedStore

SMALL = "128MB"  # the build's DuckDB: 64 MB


def _built(folder: Path, batches: list[pa.Table]) -> dict[str, list[tuple[str, ...]]]:
    """Every derived table of a store of `batches` (the first sent twice, left
    uncompacted: each day's repeats are dropped by the build), built from nothing."""
    store = EmbeddedStore(folder)
    for batch in [*batches, batches[0]]:
        store.write(batch)
    derived.rebuild(store)
    return state(store)


def test_a_build_larger_than_its_budget_gives_the_answers_of_a_large_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = model_batches(280_000)
    monkeypatch.setenv(memory.ENV, "4GB")
    expected = _built(tmp_path / "large", batches)
    monkeypatch.setenv(memory.ENV, SMALL)
    share = memory.parse(SMALL) * memory.READER_SHARE
    assert sum(b.nbytes for b in batches) > share  # the events alone exceed its DuckDB
    assert memory.build_threads() == 1
    found = _built(tmp_path / "small", batches)
    assert found["derived_executions"]
    assert found == expected
