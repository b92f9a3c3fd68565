"""A day larger than the memory budget is merged whole, in sorted runs, with the same
answers as under a large budget."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.model_batches import model_batches

from queries import duplicates
from store.embedded import EmbeddedStore


def _filled(folder: Path, batches: list[pa.Table], compaction_memory: str) -> EmbeddedStore:
    store = EmbeddedStore(folder, compaction_memory=compaction_memory)
    for batch in [*batches, batches[0]]:  # the first batch twice: a resend
        store.write(batch)
    store.compact()
    return store


def test_a_day_larger_than_the_budget_is_merged_whole_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = model_batches(200_000)
    large = _filled(tmp_path / "large", batches, "2GB")
    monkeypatch.setenv("DUPESCOPE_MEMORY", "128MB")  # the build's DuckDB: 64 MB
    small = _filled(tmp_path / "small", batches, "16MB")  # ~60 MB of rows a day
    segments = small.segments()
    assert len(segments) == len({p.parent for p in segments})  # one segment a day
    for segment in segments:
        keys = pq.read_table(segment, columns=["idempotency_key"])["idempotency_key"]
        values = keys.to_pylist()
        keyed = [k for k in values if k is not None]
        assert keyed == sorted(keyed) and values[len(keyed):] == [None] * (len(values) - len(keyed))
    count = "SELECT count(*) AS n, count(DISTINCT event_uid) AS d FROM events"
    assert small.execute(count).iloc[0].tolist() == [200_000, 200_000]
    expected = duplicates(large).sort_values("key").reset_index(drop=True)
    found = duplicates(small).sort_values("key").reset_index(drop=True)
    assert len(found) > 0
    assert found.to_dict("records") == expected.to_dict("records")
