"""The collector's group-commit writer: durable before acknowledged, each row once."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from collect_support import SlowStore
from conftest import events_to_table

from collectors.service.collector import DECODER_NICE, Collector
from collectors.service.pipeline import Pipeline, QueueFull, WriteFailed
from store.embedded import EmbeddedStore
from store.schema import as_runs


class FailingOnce(EmbeddedStore):
    """An embedded store whose first write (a collector's: hot) fails, as a full disk would."""

    failed = False

    def write_hot(self, table: pa.Table) -> int:
        if not self.failed:
            self.failed = True
            raise OSError("No space left on device")
        return super().write_hot(table)


LINE = b'{"ts": "2025-01-01T00:00:00Z", "event": "deliver", "job_id": "j1"}\n'


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


def test_a_resent_batch_of_runs_writes_only_its_new_rows(tmp_path: Path) -> None:
    pipeline = Pipeline(EmbeddedStore(tmp_path))
    pipeline.submit(as_runs(_batch(2))).wait(10)
    ticket = pipeline.submit(as_runs(_batch(4)))
    ticket.wait(10)
    assert ticket.repeats == 2
    assert EmbeddedStore(tmp_path).execute("SELECT count(*) AS n FROM events")["n"][0] == 4
    pipeline.close()


def test_batches_of_runs_and_plain_ones_queued_together_are_all_written(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    pipeline = Pipeline(store)
    runs = as_runs(_batch(3))
    plain = events_to_table([
        {"ts": f"2025-01-01T00:01:0{i}Z", "event": "deliver", "job_id": f"k{i}"}
        for i in range(3)
    ])
    tickets = [pipeline.submit(runs), pipeline.submit(plain)]
    assert [t.wait(10) for t in tickets] == [3, 3]
    jobs = store.execute("SELECT job_id FROM events ORDER BY ts")["job_id"].tolist()
    assert jobs == ["j0", "j1", "j2", "k0", "k1", "k2"]
    pipeline.close()


class FailingWhenReleased(EmbeddedStore):
    """An embedded store whose first write waits for the test, then fails."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writing, self.release, self.failed = threading.Event(), threading.Event(), False

    def write_hot(self, table: pa.Table) -> int:
        if not self.failed:
            self.failed = True
            self.writing.set()
            self.release.wait(10)
            raise OSError("No space left on device")
        return super().write_hot(table)


def test_a_resend_queued_behind_a_failing_write_fails_with_it(tmp_path: Path) -> None:
    store = FailingWhenReleased(tmp_path)
    pipeline = Pipeline(store)
    first = pipeline.submit(_batch())
    assert store.writing.wait(10)
    resend = pipeline.submit(_batch())  # all repeats of rows not durable yet
    store.release.set()
    for ticket in (first, resend):
        with pytest.raises(WriteFailed):
            ticket.wait(10)
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_a_thread_that_decoded_a_body_runs_below_the_writer(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    seen: dict[str, int] = {}

    def receive() -> None:
        seen["before"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        collector.jsonlines(LINE, "test")
        seen["after"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    receiver = threading.Thread(target=receive)
    receiver.start()
    receiver.join(30)
    collector.close()
    assert seen["after"] == min(19, seen["before"] + DECODER_NICE)


def test_a_process_that_decodes_on_its_main_thread_keeps_its_priority(tmp_path: Path) -> None:
    collector = Collector(EmbeddedStore(tmp_path))
    before = os.getpriority(os.PRIO_PROCESS, 0)
    collector.jsonlines(LINE, "test")
    collector.close()
    assert os.getpriority(os.PRIO_PROCESS, 0) == before


def _wide_batch(job_id: str) -> pa.Table:
    """One row whose attrs hold 2 MB."""
    return events_to_table([{"ts": "2025-01-01T00:00:00Z", "event": "deliver",
                             "job_id": job_id, "attrs": {"blob": "x" * (2 << 20)}}])


def test_the_queue_is_bounded_in_bytes_as_well_as_rows(tmp_path: Path) -> None:
    store = SlowStore(EmbeddedStore(tmp_path), blocked=True)
    pipeline = Pipeline(store, queue_bytes=1 << 20)
    first = pipeline.submit(_wide_batch("w1"))  # alone in the queue: let in, however large
    with pytest.raises(QueueFull):
        pipeline.submit(_wide_batch("w2"))  # one row, far under the bound in rows
    store.gate.set()
    assert first.wait(10) == 1
    assert pipeline.submit(_wide_batch("w2")).wait(10) == 1
    pipeline.close()
