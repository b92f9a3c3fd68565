"""How BullMQ's events-stream entries become contract rows (collectors/bullmq_events.py),
entry by entry, with the job hash and the worker connections given inline."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from collectors.bullmq_events import (
    CRASH,
    RECEIVER,
    STALL,
    STALL_OR_CRASH,
    BullMQMapper,
    Clients,
    Entry,
    entry_micros,
    worker_client_name,
)
from collectors.mapping import FieldMapping
from collectors.normalise import RecordError, Row
from dupescope.cli import main

T0 = 1_796_000_000_000  # ms
W1 = worker_client_name("bull", "billing", "w1")


def entry(ms: int, event: str, job: str | None = "7", queue: str = "billing",
          seq: int = 0, **fields: str) -> Entry:
    values = {"event": event, **({"jobId": job} if job is not None else {}), **fields}
    return Entry(queue, f"{T0 + ms}-{seq}", values)


def clients(ms: int, **ids: str) -> Clients:
    """Connections listed at T0 + ms: worker name -> connection id."""
    return Clients(T0 + ms, {worker_client_name("bull", "billing", name): frozenset({i})
                             for name, i in ids.items()})


def job_hash(**fields: object) -> dict[str, str | None]:
    values: dict[str, str | None] = {"name": "charge", "data": '{"order_id": "o-1"}'}
    values.update({k: None if v is None else str(v) for k, v in fields.items()})
    return values


def attrs(row: Row) -> dict:
    return orjson.loads(row["attrs"])


@pytest.fixture
def mapper() -> BullMQMapper:
    mapping = FieldMapping(fields={"idempotency_key": ("order_id",)})
    return BullMQMapper(stream_name="redis://r:6379/0", mapping=mapping)


def run_once(mapper: BullMQMapper, start: int = 0, worker: str = "w1",
             listed: Mapping[str, str] | None = None) -> list[Row]:
    listed = {"w1": "11", "w2": "12"} if listed is None else listed
    rows = mapper.map(entry(start, "added", name="charge"), job_hash())
    rows += mapper.map(entry(start + 5, "active", prev="waiting"),
                       job_hash(ats=1, pb=worker), clients(start + 6, **listed))
    return rows


def test_added_is_an_enqueue_with_the_name_and_the_key_from_the_data(
    mapper: BullMQMapper,
) -> None:
    (row,) = mapper.map(entry(0, "added", name="charge"), job_hash())
    assert (row["event"], row["job_id"], row["job_type"], row["idempotency_key"],
            row["queue"]) == ("enqueue", "billing:7", "charge", "o-1", "billing")
    assert row["ts"] == T0 * 1000


def test_active_is_a_deliver_by_the_named_worker_with_its_attempt(mapper: BullMQMapper) -> None:
    deliver = run_once(mapper)[1]
    assert (deliver["event"], deliver["worker_id"], deliver["delivery_attempt"],
            deliver["idempotency_key"]) == ("deliver", "w1", 1, "o-1")
    assert deliver["execution_id"] == deliver["event_uid"]


def test_completed_and_failed_settle_the_run(mapper: BullMQMapper) -> None:
    deliver = run_once(mapper)[1]
    (ack,) = mapper.map(entry(20, "completed", returnvalue='{"ok":1}'), job_hash())
    assert (ack["event"], ack["execution_id"], ack["worker_id"]) == (
        "ack", deliver["event_uid"], "w1")
    deliver = mapper.map(entry(30, "active"), job_hash(ats=2, pb="w1"))[0]
    (fail,) = mapper.map(entry(40, "failed", failedReason="boom"), job_hash())
    assert (fail["event"], fail["execution_id"], attrs(fail)["reason"]) == (
        "fail", deliver["event_uid"], "boom")


def test_actives_are_counted_as_delivery_attempts(mapper: BullMQMapper) -> None:
    run_once(mapper)
    assert mapper.map(entry(20, "waiting", prev="active"), job_hash()) == []
    second = mapper.map(entry(30, "active"), job_hash(ats=2, pb="w2"))
    assert [r["event"] for r in second] == ["nack", "deliver"]
    assert second[1]["delivery_attempt"] == 2


def test_a_waiting_from_active_without_a_stall_is_a_retried_failure(
    mapper: BullMQMapper,
) -> None:
    deliver = run_once(mapper)[1]
    mapper.map(entry(20, "waiting", prev="active"), job_hash(failedReason="card declined"))
    (nack,) = mapper.settle("billing")
    assert (nack["event"], nack["execution_id"], nack["ts"]) == (
        "nack", deliver["event_uid"], (T0 + 20) * 1000)
    assert attrs(nack)["reason"] == "failed: card declined; BullMQ retries it (waiting again)"


def test_a_delay_while_running_is_a_retry_after_a_backoff(mapper: BullMQMapper) -> None:
    run_once(mapper)
    (nack,) = mapper.map(entry(20, "delayed", delay=str(T0 + 500)), job_hash())
    assert nack["event"] == "nack" and "backoff" in attrs(nack)["reason"]


def test_a_delayed_add_settles_nothing(mapper: BullMQMapper) -> None:
    mapper.map(entry(0, "added", name="charge"), job_hash())
    assert mapper.map(entry(0, "delayed", seq=1, delay=str(T0 + 500)), job_hash()) == []


def test_a_stall_whose_worker_connection_closed_is_a_crash(mapper: BullMQMapper) -> None:
    deliver = run_once(mapper)[1]
    mapper.map(entry(2000, "waiting", prev="active"), job_hash())
    (nack,) = mapper.map(entry(2000, "stalled", seq=1), job_hash(stc=1),
                         clients(2001, w2="12"))
    assert (nack["event"], nack["execution_id"], nack["worker_id"]) == (
        "nack", deliver["event_uid"], "w1")
    assert attrs(nack)["bullmq.stall"] == CRASH
    assert attrs(nack)["reason"].startswith("WorkerLost")
    assert attrs(nack)["settled_by"] == RECEIVER


def test_a_worker_gone_when_its_run_was_seen_starting_crashed(mapper: BullMQMapper) -> None:
    run_once(mapper, listed={"w2": "12"})
    (nack,) = mapper.map(entry(2000, "stalled"), job_hash(), clients(2001, w2="12"))
    assert attrs(nack)["bullmq.stall"] == CRASH


def test_a_stalled_run_still_connected_when_re_run_elsewhere_overlaps_it(
    mapper: BullMQMapper,
) -> None:
    deliver = run_once(mapper)[1]
    mapper.map(entry(2000, "waiting", prev="active"), job_hash())
    assert mapper.map(entry(2000, "stalled", seq=1), job_hash(), clients(2001, w1="11")) == []
    rerun = mapper.map(entry(2002, "active"), job_hash(ats=2, pb="w2"),
                       clients(2010, w1="11", w2="12"))
    assert [r["event"] for r in rerun] == ["deliver", "lock_expired"]
    late = rerun[1]
    assert late["execution_id"] == deliver["event_uid"] and late["worker_id"] == "w1"
    assert late["ts"] == (T0 + 2010) * 1000 > rerun[0]["ts"]
    assert attrs(late)["bullmq.stall"] == STALL


def test_a_stalled_run_re_run_by_its_own_worker_is_dated_at_the_stall(
    mapper: BullMQMapper,
) -> None:
    run_once(mapper)
    mapper.map(entry(2000, "stalled"), job_hash(), clients(2001, w1="11"))
    rerun = mapper.map(entry(5000, "active"), job_hash(ats=2, pb="w1"), clients(5001, w1="11"))
    assert rerun[1]["ts"] == (T0 + 2000) * 1000


@pytest.mark.parametrize("listed, worker", [(None, "w1"), ({"w1": "11"}, None)])
def test_without_the_connections_a_stall_is_a_stall_or_a_crash(
    mapper: BullMQMapper, listed: dict[str, str] | None, worker: str | None,
) -> None:
    mapper.map(entry(0, "added", name="charge"), job_hash())
    mapper.map(entry(5, "active"), job_hash(ats=1, pb=worker),
               clients(6, **listed) if listed else None)
    (row,) = mapper.map(entry(2000, "stalled"), job_hash(),
                        clients(2001, **listed) if listed else None)
    assert row["event"] == "lock_expired"
    assert attrs(row)["bullmq.stall"] == STALL_OR_CRASH


def test_connections_listed_long_after_an_entry_say_nothing_of_it(mapper: BullMQMapper) -> None:
    run_once(mapper)
    (row,) = mapper.map(entry(2000, "stalled"), job_hash(), clients(60_000, w2="12"))
    assert attrs(row)["bullmq.stall"] == STALL_OR_CRASH


def test_a_hash_that_moved_on_does_not_name_the_runs_worker(mapper: BullMQMapper) -> None:
    mapper.map(entry(0, "added", name="charge"), job_hash())
    (deliver,) = mapper.map(entry(5, "active"), job_hash(ats=2, pb="w2"))
    assert deliver["worker_id"] is None
    assert attrs(deliver)["bullmq.pb_of_a_later_run"] == "w2"


def test_a_job_id_added_again_is_a_second_job_under_the_first_ones_key(
    mapper: BullMQMapper,
) -> None:
    mapper.map(entry(0, "added", job="inv-7", name="charge"), {})  # removed before read
    mapper.map(entry(5, "active", job="inv-7"), {})
    mapper.map(entry(9, "completed", job="inv-7"), {})
    (again,) = mapper.map(entry(50, "added", job="inv-7", name="charge"), job_hash())
    assert again["job_id"] == f"billing:inv-7@{T0 + 50}-0"
    assert again["idempotency_key"] == "billing:inv-7"


def test_the_same_job_id_in_two_queues_is_two_jobs(mapper: BullMQMapper) -> None:
    (a,) = mapper.map(entry(0, "added", name="x"), job_hash())
    (b,) = mapper.map(entry(0, "added", queue="mail", name="x"), job_hash())
    assert (a["job_id"], b["job_id"]) == ("billing:7", "mail:7")
    assert a["event_uid"] != b["event_uid"]


@pytest.mark.parametrize("kind, extra", [
    ("duplicated", {}),
    ("deduplicated", {"deduplicationId": "d-1", "deduplicatedJobId": "8"}),
])
def test_a_suppressed_add_is_an_enqueue_deduped(
    mapper: BullMQMapper, kind: str, extra: dict[str, str],
) -> None:
    (row,) = mapper.map(entry(0, kind, **extra), job_hash())
    assert (row["event"], row["job_id"], row["idempotency_key"]) == (
        "enqueue_deduped", "billing:7", "o-1")


def test_a_deduplication_id_is_the_key_where_the_data_names_none() -> None:
    mapper = BullMQMapper(stream_name="redis://r:6379/0")
    (row,) = mapper.map(entry(0, "added", name="x"), job_hash(deid="invoice-9"))
    assert row["idempotency_key"] == "invoice-9"


def test_the_same_entry_read_twice_has_one_uid() -> None:
    first = BullMQMapper(stream_name="redis://r:6379/0").map(entry(0, "added"), job_hash())
    again = BullMQMapper(stream_name="redis://r:6379/0").map(entry(0, "added"), job_hash())
    assert first[0]["event_uid"] == again[0]["event_uid"]


def test_entries_of_one_millisecond_keep_their_order() -> None:
    assert entry_micros(f"{T0}-0") < entry_micros(f"{T0}-1") < entry_micros(f"{T0 + 1}-0")


@pytest.mark.parametrize("bad", [
    Entry("billing", f"{T0}-0", {"jobId": "1"}),
    Entry("billing", f"{T0}-0", {"event": "active"}),
    Entry("billing", "not-an-id", {"event": "added", "jobId": "1"}),
])
def test_a_malformed_entry_is_refused(mapper: BullMQMapper, bad: Entry) -> None:
    with pytest.raises(RecordError):
        mapper.map(bad, {})


def test_other_entries_give_no_row(mapper: BullMQMapper) -> None:
    assert mapper.map(entry(0, "progress", data="50"), {}) == []
    assert mapper.map(entry(0, "drained", job=None, seq=1), {}) == []


def test_a_named_workers_connection_is_named_as_bullmq_names_it() -> None:
    # As CLIENT LIST showed it for `new Worker("billing", fn, {name: "w1"})`.
    assert W1 == "bull:YmlsbGluZw==:w:w1"


def test_a_stalled_job_failed_without_a_re_run_keeps_its_stall(mapper: BullMQMapper) -> None:
    deliver = run_once(mapper)[1]
    mapper.map(entry(2000, "stalled"), job_hash(), clients(2001, w1="11"))
    rows = mapper.map(entry(3000, "failed", failedReason="job stalled more than allowable limit"),
                      job_hash())
    assert [r["event"] for r in rows] == ["lock_expired", "fail"]
    assert rows[0]["execution_id"] == deliver["event_uid"]


def test_without_the_redis_client_the_option_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if not installed
    result = CliRunner().invoke(main, [
        "--store", str(tmp_path / "store"), "collect", "--http-port", "-1",
        "--grpc-port", "-1", "--bullmq-redis", "redis://127.0.0.1:6379/0",
    ])
    assert result.exit_code == 1
    assert "pip install 'dupescope[bullmq]'" in result.output


def test_a_malformed_entry_leaves_a_held_retry_for_the_next(mapper: BullMQMapper) -> None:
    run_once(mapper)
    mapper.map(entry(20, "waiting", prev="active"), job_hash())
    with pytest.raises(RecordError):
        mapper.map(entry(21, "active", job=None), {})
    assert [r["event"] for r in mapper.settle("billing")] == ["nack"]
