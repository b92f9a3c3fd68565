"""The collector's group-commit writer: durable before acknowledged, each row once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from conftest import events_to_table

from collectors.service.pipeline import Pipeline, WriteFailed
from store.embedded import EmbeddedStore


class FailingOnce(EmbeddedStore):
    """An embedded store whose first write fails, as a full disk would."""

    failed = False

    def write(self, table: pa.Table) -> int:
        if not self.failed:
            self.failed = True
            raise OSError("No space left on device")
        return super().write(table)


def _batch(n: int = 3) -> pa.Table:
    return events_to_table([
        {"ts": f"2025-01-01T00:00:0{i}Z", "event": "deliver", "job_id": f"j{i}"}
        for i in range(n)
    ])


def test_a_batch_whose_write_failed_is_written_when_it_is_sent_again(tmp_path: Path) -> None:
    pipeline = Pipeline(FailingOnce(tmp_path))
    with pytest.raises(WriteFailed, match="No space left"):
        pipeline.submit(_batch()).wait(10)
    assert pipeline.submit(_batch()).wait(10) == 3
    assert pipeline.snapshot()["written"] == 3
    pipeline.close()


def test_a_batch_sent_twice_is_written_once(tmp_path: Path) -> None:
    pipeline = Pipeline(EmbeddedStore(tmp_path))
    pipeline.submit(_batch()).wait(10)
    pipeline.submit(_batch()).wait(10)
    snapshot = pipeline.snapshot()
    assert (snapshot["written"], snapshot["deduplicated"]) == (3, 3)
    pipeline.close()


def test_batches_sent_at_once_are_each_written_once(tmp_path: Path) -> None:
    pipeline = Pipeline(EmbeddedStore(tmp_path))
    tickets = [pipeline.submit(_batch(n)) for n in (1, 2, 3, 3, 2)]
    for ticket in tickets:
        ticket.wait(10)
    pipeline.close()
    assert EmbeddedStore(tmp_path).execute("SELECT count(*) AS n FROM events")["n"][0] == 3
