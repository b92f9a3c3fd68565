"""The Sidekiq logs source against real Sidekiq 6.4 processes (tests/sidekiq_lab): a
retry after a failure, a job pushed back at shutdown and run again, a producer that pushes
twice. Scored against the jobs' own side-effect ledger."""

from __future__ import annotations

from uuid import uuid4

import pytest
from sidekiq_lab import lab
from support.redis_db import claim_redis_db, release_redis_db
from support.scoring import score

from collectors.files import ingest_files
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from queries import duplicates
from store.embedded import EmbeddedStore

#: The causes Sidekiq's logs carry the evidence of (docs/queues-sidekiq-sqs.md).
EVIDENCE = {"retry_after_failure", "worker_crash", "producer_retry"}
#: A producer's second push of work that then succeeds: no line names its args.
UNSEEN = {"order-twice"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[lab.Lab, list[dict]]:
    why = lab.available()
    if why:
        pytest.skip(why)
    workdir = tmp_path_factory.mktemp("sidekiq-lab")
    db = claim_redis_db()
    try:
        result = lab.run(workdir, db, f"dupescope-{uuid4().hex[:8]}")
    finally:
        import redis

        redis.Redis(db=db).flushdb()  # the lab's own database: retry set, queue, stats
        release_redis_db(db)
    store = EmbeddedStore(workdir / "store")
    mapping = FieldMapping(fields={"idempotency_key": ("sidekiq.args.0",)})
    report = ingest_files([str(p) for p in result.logs], store, Normaliser(mapping))
    assert report.rejected == []
    found = duplicates(store)
    rows = found.to_dict("records")
    key_of = result.key_of()
    for row in rows:  # a job never keyed by its args is reported by its jid
        row["key"] = key_of.get(row["key"], row["key"])
    return result, rows


def test_the_lab_injected_every_fault(world: tuple[lab.Lab, list[dict]]) -> None:
    result, _ = world
    assert lab.truth(result.runs) == {
        "order-slow": "worker_crash",
        "order-retry-1": "retry_after_failure",
        "order-retry-2": "retry_after_failure",
        "order-twice": "producer_retry",
        "order-twice-failing": "producer_retry",
    }


def test_both_log_formats_were_written_and_read(world: tuple[lab.Lab, list[dict]]) -> None:
    result, _ = world
    pretty, as_json = (path.read_text() for path in result.logs)
    assert " INFO: start" in pretty and '"msg":"start"' in as_json


def test_the_logs_find_every_duplicate_they_carry_with_its_cause(
    world: tuple[lab.Lab, list[dict]],
) -> None:
    result, rows = world
    truth = {k: c for k, c in lab.truth(result.runs).items() if k not in UNSEEN}
    scored = score(rows, truth, EVIDENCE)
    print(f"sidekiq-log: {scored.summary()}; lab {result.seconds:.1f} s")
    assert scored.precision >= 0.99 and scored.recall >= 0.99, scored.summary()
    assert scored.cause_accuracy >= 0.95, scored.summary()


def test_a_pushed_back_job_reads_as_a_lost_worker(world: tuple[lab.Lab, list[dict]]) -> None:
    _, rows = world
    assert {row["key"]: row["cause"] for row in rows}["order-slow"] == "worker_crash"


def test_a_producers_second_push_of_work_that_succeeds_is_not_seen(
    world: tuple[lab.Lab, list[dict]],
) -> None:
    _, rows = world
    assert "order-twice" not in {row["key"] for row in rows}
