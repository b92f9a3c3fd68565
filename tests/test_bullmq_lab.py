"""BullMQ's events streams from real Node workers (tests/bullmq_lab) on a Redis database
of the test's own, read live by `BullMQSource` into an embedded store; the duplicates it
finds are scored against the side-effect ledger the jobs wrote (tests/bullmq_support.py
describes the scenario and its truth)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from bullmq_support import MAPPING, TRUTH, Lab, lab_missing, load_ledger, wait_for
from click.testing import CliRunner
from collect_support import Subprocess, get_json
from support import ledger
from support.scoring import Score, score

from collectors.mapping import FieldMapping
from collectors.service.bullmq_source import BullMQSource
from collectors.service.collector import Collector
from dupescope.cli import main
from store.embedded import EmbeddedStore

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(lab_missing() is not None, reason=lab_missing() or ""),
]
CAUSES = ("producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery",
          "retry_after_failure")


class Reading:
    """A store, its collector and a BullMQ source on the lab's Redis, in this process."""

    def __init__(self, root: Path, lab: Lab, **options: object) -> None:
        self.root = root
        self.store = EmbeddedStore(root)
        self.collector = Collector(self.store)
        self.mapping = FieldMapping.load(_mapping_file(root.parent))
        self.lab = lab
        self.options = options
        self.source: BullMQSource | None = None

    def start(self) -> BullMQSource:
        self.source = BullMQSource(self.collector, self.lab.url, self.root / "bullmq-state.json",
                                   prefix=self.lab.prefix, mapping=self.mapping,
                                   **self.options).start()  # type: ignore[arg-type]
        assert self.source.connected.wait(10), "the source did not connect"
        return self.source

    def stop(self) -> None:
        if self.source is not None:
            self.source.stop()

    def caught_up(self, timeout: float = 10.0) -> None:
        """Until the source has read every entry of the lab's stream."""
        client = self.lab.redis()
        key = f"{self.lab.prefix}:{self.lab.queue}:events"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = client.xrevrange(key, count=1)
            stored = self.source.state.ids.get(f"{self.source.shown_url}|{self.lab.prefix}|"
                                               f"{self.lab.queue}") if self.source else None
            if last and stored == last[0][0]:
                return
            time.sleep(0.1)
        raise AssertionError("the source did not catch up with the stream")

    def close(self) -> None:
        self.stop()
        self.collector.close()
        self.store.close()

    def duplicates(self) -> list[dict]:
        result = CliRunner().invoke(
            main, ["--store", str(self.root), "duplicates", "--format", "json"])
        assert result.exit_code == 0, result.output
        return orjson.loads(result.output)

    def rows(self) -> list[dict]:
        frame = self.store.execute("SELECT * FROM events ORDER BY ts")
        return frame.to_dict("records")


def _mapping_file(folder: Path) -> Path:
    path = folder / "mapping.toml"
    path.write_text(MAPPING)
    return path


@dataclass
class Run:
    lab: Lab
    reading: Reading
    ledger: list[ledger.Row]
    duplicates: list[dict]
    seconds: float

    def score(self) -> Score:
        ran_twice = {k for k, n in ledger.effects_by_key(self.ledger).items() if n > 1}
        assert ran_twice == set(TRUTH), f"the lab's faults did not all happen: {ran_twice}"
        return score([self.truth_keyed(row) for row in self.duplicates], TRUTH,
                     evidence=CAUSES)

    def truth_keyed(self, row: dict) -> dict:
        """A row keyed by its job id (the job was deleted before its data could be read,
        as removeOnComplete does) under the key the ledger knows that job by."""
        if row["key"] in TRUTH:
            return row
        by_job = {r.job_id: r.key for r in self.ledger}
        keys = {by_job.get(job_id.split("@")[0]) for job_id in row["job_ids"]}
        return {**row, "key": keys.pop()} if len(keys) == 1 and None not in keys else row


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One lab run, read live by one source: the tests below look at it."""
    root = tmp_path_factory.mktemp("bullmq")
    lab = Lab(root)
    reading = Reading(root / "store", lab, discover_seconds=0.2)
    try:
        started = time.monotonic()
        reading.start()
        lab.start_workers()
        lab.produce()
        lab.wait_done()
        reading.caught_up()
        seconds = time.monotonic() - started
        reading.stop()
        truth_rows = load_ledger(lab.lines, root / "ledger.sqlite")
        yield Run(lab, reading, truth_rows, reading.duplicates(), seconds)
    finally:
        reading.close()
        lab.cleanup()


def test_the_source_alone_finds_every_duplicate_and_its_cause(run: Run) -> None:
    result = run.score()
    assert result.precision >= 0.99, result.summary()
    assert result.recall >= 0.99, result.summary()
    assert result.cause_accuracy >= 0.95, result.summary()


def test_a_stall_is_told_from_a_crash_by_the_workers_connections(run: Run) -> None:
    rows = run.reading.rows()
    stall = [r for r in rows if r["idempotency_key"] == "stall-1" and r["event"] == "lock_expired"]
    crash = [r for r in rows if r["idempotency_key"] == "crash-1" and r["event"] == "nack"]
    assert [orjson.loads(r["attrs"])["bullmq.stall"] for r in stall] == ["stall"]
    assert [orjson.loads(r["attrs"])["bullmq.stall"] for r in crash] == ["crash"]
    assert orjson.loads(crash[0]["attrs"])["reason"].startswith("WorkerLost")


def test_a_job_id_added_again_after_removal_is_a_second_job(run: Run) -> None:
    (row,) = [d for d in map(run.truth_keyed, run.duplicates) if d["key"] == "reid-1"]
    assert len(row["job_ids"]) == 2 and row["executions"] == 2
    assert row["cause"] == "producer_retry"


def test_jobs_deduplicated_by_bullmq_are_no_duplicates(run: Run) -> None:
    keys = {d["key"] for d in run.duplicates}
    assert {"held-1", "dedup-held-1"}.isdisjoint(keys)
    deduped = {r["idempotency_key"] for r in run.reading.rows() if r["event"] == "enqueue_deduped"}
    assert {"held-1", "dedup-held-1"} <= deduped


def test_deliveries_count_their_attempts(run: Run) -> None:
    attempts = sorted(r["delivery_attempt"] for r in run.reading.rows()
                      if r["event"] == "deliver" and r["idempotency_key"] == "retry-now-1")
    assert attempts == [1, 2]


def test_a_retried_failure_is_a_nack_that_says_why(run: Run) -> None:
    nacks = {r["idempotency_key"]: orjson.loads(r["attrs"])["reason"]
             for r in run.reading.rows() if r["event"] == "nack"
             and r["idempotency_key"] in ("retry-now-1", "retry-backoff-1")}
    assert nacks == {
        "retry-now-1": "failed: transient failure; BullMQ retries it (waiting again)",
        "retry-backoff-1": "failed: transient failure; BullMQ retries it (after a backoff)",
    }


def test_the_scenario_is_short(run: Run) -> None:
    assert run.seconds < 40, run.seconds


def test_a_restarted_reader_neither_loses_nor_repeats(run: Run, tmp_path: Path) -> None:
    """Read the lab's stream again, stopped and started part way: every entry is read
    once, and the rows are those the live reading made."""
    again = Reading(tmp_path / "store", run.lab, read_count=25)
    try:
        first = again.start()
        deadline = time.monotonic() + 10
        while first.stats["entries"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        again.stop()
        read_first = first.stats["entries"]
        second = again.start()
        again.caught_up()
        again.stop()
        total = run.lab.redis().xlen(f"{run.lab.prefix}:{run.lab.queue}:events")
        assert 0 < read_first < total
        assert read_first + second.stats["entries"] == total
        live = {r["event_uid"] for r in run.reading.rows()}
        replayed = {r["event_uid"] for r in again.rows()}
        assert replayed == live
        # Read after the fact, the connections say nothing of the stalls any more.
        stalls = [orjson.loads(r["attrs"])["bullmq.stall"] for r in again.rows()
                  if r["event"] == "lock_expired"]
        assert stalls == ["stall or crash", "stall or crash"]
    finally:
        again.close()


def test_a_stream_trimmed_past_the_stored_id_is_reported(
    run: Run, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    client = run.lab.redis()
    key = f"{run.lab.prefix}:trimmed:events"
    ids = [client.xadd(key, {"event": "added", "jobId": str(i), "name": "x"}) for i in range(6)]
    reading = Reading(tmp_path / "store", run.lab)
    reading.root.mkdir(parents=True)
    (reading.root / "bullmq-state.json").write_bytes(orjson.dumps(
        {f"{run.lab.url}|{run.lab.prefix}|trimmed": ids[1]}))
    client.xtrim(key, maxlen=2, approximate=False)
    try:
        with caplog.at_level(logging.WARNING, logger="dupescope.collect"):
            source = reading.start()
            deadline = time.monotonic() + 10
            while source.stats["rows"] < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert source.stats["trimmed"] == 1
        assert any("trimmed past the last entry stored" in r.getMessage() and ids[4] in
                   r.getMessage() for r in caplog.records)
        enqueued = {r["job_id"] for r in reading.rows() if r["event"] == "enqueue"}
        assert {"trimmed:4", "trimmed:5"} <= enqueued
    finally:
        reading.close()
        client.delete(key)


def test_malformed_entries_are_counted_and_the_rest_kept(run: Run, tmp_path: Path) -> None:
    client = run.lab.redis()
    key = f"{run.lab.prefix}:malformed:events"
    client.xadd(key, {"jobId": "1"})  # no event
    client.xadd(key, {"event": "active"})  # no job id
    client.xadd(key, {"event": "added", "jobId": "2", "name": "kept"})
    reading = Reading(tmp_path / "store", run.lab)
    try:
        source = reading.start()
        deadline = time.monotonic() + 10
        while source.stats["malformed"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        deadline = time.monotonic() + 10
        while not any(r["job_id"] == "malformed:2" for r in reading.rows()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert source.stats["malformed"] == 2
        assert [r["job_type"] for r in reading.rows() if r["job_id"] == "malformed:2"] == ["kept"]
    finally:
        reading.close()
        client.delete(key)


@pytest.mark.timeout(120)
def test_collect_killed_and_restarted_stores_every_entry_once(run: Run, tmp_path: Path) -> None:
    """`dupescope collect --bullmq-redis`, as a user runs it: SIGKILLed once it stored
    rows, then started again on the same store, it ends with the live reading's rows."""
    store_path = tmp_path / "store"
    args = ("--bullmq-redis", run.lab.url, "--bullmq-queue", run.lab.queue,
            "--mapping", str(_mapping_file(tmp_path)))
    live = {r["event_uid"] for r in run.reading.rows()}

    def stored() -> set[str]:
        store = EmbeddedStore(store_path)
        try:
            return set(store.execute("SELECT event_uid FROM events")["event_uid"])
        finally:
            store.close()

    first = Subprocess(store_path, *args)
    try:
        [report] = wait_for(lambda: [r for r in get_json(first.url + "/healthz")
                                     .get("bullmq", []) if r["rows"]], 20, "rows stored")
        assert report["redis"] == run.lab.url and report["connected"]
    finally:
        first.kill()
    last = run.lab.redis().xrevrange(f"{run.lab.prefix}:{run.lab.queue}:events", count=1)
    state = store_path / "bullmq-state.json"

    def read_to_the_end() -> bool:
        return state.exists() and last[0][0] in orjson.loads(state.read_bytes()).values()

    second = Subprocess(store_path, *args)
    try:
        wait_for(read_to_the_end, 30, "the rest of the stream")
    finally:
        second.stop()
    assert stored() == live
    result = CliRunner().invoke(main, ["--store", str(store_path), "duplicates",
                                       "--format", "json"])
    # Read after the fact, a job removeOnComplete deleted has no data left to key it by.
    assert {run.truth_keyed(d)["key"] for d in orjson.loads(result.output)} == set(TRUTH)
