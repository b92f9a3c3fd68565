"""The Sidekiq and SQS labs of the test suite (tests/sidekiq_lab, tests/sqs_lab) at a
larger scale: every fault and every kind of job `--scale` times over, each source scored
alone against the jobs' side-effect ledger, with the lab's wall time.

    python -m benchmarks queue_labs --scale 10 [--only sidekiq|sqs]

The labs live with the tests, whose helpers they use: this harness puts tests/ on the path.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

TESTS = Path(__file__).resolve().parents[1] / "tests"


def _sidekiq(scale: int, workdir: Path) -> None:
    import redis
    from sidekiq_lab import lab
    from support.redis_db import claim_redis_db, release_redis_db
    from support.scoring import score

    from collectors.files import ingest_files
    from collectors.mapping import FieldMapping
    from collectors.normalise import Normaliser
    from queries import duplicates
    from store.embedded import EmbeddedStore

    why = lab.available()
    if why:
        print(f"sidekiq: skipped, {why}")
        return
    db = claim_redis_db()
    try:
        result = lab.run(workdir, db, f"dupescope-bench-{uuid4().hex[:8]}", scale=scale)
    finally:
        redis.Redis(db=db).flushdb()
        release_redis_db(db)
    store = EmbeddedStore(workdir / "sidekiq-store")
    mapping = FieldMapping(fields={"idempotency_key": ("sidekiq.args.0",)})
    started = time.perf_counter()
    ingest_files([str(p) for p in result.logs], store, Normaliser(mapping))
    key_of = result.key_of()
    rows = [{**r, "key": key_of.get(r["key"], r["key"])}
            for r in duplicates(store).to_dict("records")]
    took = time.perf_counter() - started
    # A producer's second push of work that succeeds: no log line names its args.
    truth = {k: c for k, c in lab.truth(result.runs).items()
             if not re.fullmatch(r"order-twice(-\d+)?", k)}
    scored = score(rows, truth, {"retry_after_failure", "worker_crash", "producer_retry"})
    print(f"sidekiq-log, scale {scale}: {scored.summary()}")
    print(f"  lab {result.seconds:.1f} s, ingest + duplicates {took:.2f} s")


def _sqs(scale: int, workdir: Path) -> None:
    import pyarrow as pa
    from collect_support import free_port, running
    from sqs_lab import lab
    from support.scoring import score

    from queries import duplicates
    from store.embedded import EmbeddedStore
    from store.schema import as_events

    why = lab.available()
    if why:
        print(f"sqs: skipped, {why}")
        return
    store = EmbeddedStore(workdir / "sqs-store")
    port = free_port()
    with running(store, http_port=port, grpc_port=None):
        result = lab.run(workdir, free_port(), port, record_receive_count=True, scale=scale)
    events = as_events(store.arrow("SELECT * FROM events"))
    index = events.schema.get_field_index("delivery_attempt")
    alone = EmbeddedStore(workdir / "sqs-alone")
    alone.write(events.set_column(index, "delivery_attempt",
                                  pa.nulls(len(events), events.schema.field(index).type)))
    key_of = {message_id: key for key, message_id in result.sends}
    truth = {k: c for k, c in lab.truth(result.runs).items() if c != "producer_retry"}
    for name, source, evidence in (
        ("spans + receive count", store, {"visibility_timeout", "worker_crash"}),
        ("spans alone", alone, {"visibility_timeout"}),
    ):
        rows = [{**r, "key": key_of.get(r["key"], r["key"])}
                for r in duplicates(source).to_dict("records")]
        carried = {k: c for k, c in truth.items() if c in evidence}
        print(f"sqs {name}, scale {scale}: {score(rows, carried, evidence).summary()}")
    print(f"  lab {result.seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks queue_labs")
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--only", choices=("sidekiq", "sqs"))
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    with tempfile.TemporaryDirectory(prefix="dupescope-queue-labs-") as folder:
        if args.only in (None, "sidekiq"):
            _sidekiq(args.scale, Path(folder))
        if args.only in (None, "sqs"):
            _sqs(args.scale, Path(folder))


if __name__ == "__main__":
    main()
