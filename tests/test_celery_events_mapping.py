"""Celery events -> contract rows, without a broker. The events are shaped exactly as
Celery 5.7 emits them (tests/support/celery_events.py, captured from a real prefork worker
started with -E)."""

from __future__ import annotations

import orjson
import pytest
from support.celery_events import UUID, WORKER, T, heartbeat, received, sent, task

from collectors.celery_events import RECEIVER, CeleryEventMapper
from collectors.normalise import RecordError


def attrs(row: dict) -> dict:
    return orjson.loads(row["attrs"]) if row["attrs"] else {}


def test_task_sent_is_the_enqueue_with_name_and_queue() -> None:
    row = CeleryEventMapper().map(sent(), heard_at=0).row
    assert row["event"] == "enqueue"
    assert (row["job_id"], row["job_type"], row["queue"]) == (UUID, "billing.charge", "billing")
    assert row["worker_id"] is None  # the producer is no worker
    assert attrs(row)["celery.hostname"] == "gen11491@web"
    assert row["ts"] == 1_796_156_226_000_000


def test_task_received_is_a_deliver_by_hostname_and_pid_without_an_attempt() -> None:
    row = CeleryEventMapper().map(received(), heard_at=0).row
    assert row["event"] == "deliver"
    assert row["worker_id"] == "w1@billing:11460"
    assert row["job_type"] == "billing.charge"
    assert row.get("delivery_attempt") is None
    assert attrs(row)["celery.retries"] == 0


def test_later_events_take_the_task_name_from_its_received_event() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), heard_at=0)
    row = mapper.map(task("task-succeeded", T + 0.01, 6, result="'ok'", runtime=0.0006),
                     heard_at=0).row
    assert row["event"] == "ack"
    assert row["job_type"] == "billing.charge"
    assert attrs(row)["celery.runtime"] == 0.0006


def test_an_event_of_a_task_not_seen_before_has_no_job_type() -> None:
    row = CeleryEventMapper().map(task("task-succeeded", T, 6, result="4"), heard_at=0).row
    assert (row["event"], row["job_id"], row["job_type"]) == ("ack", UUID, None)


def test_the_queue_of_the_enqueue_carries_over_to_the_deliver() -> None:
    mapper = CeleryEventMapper()
    mapper.map(sent(), heard_at=0)
    assert mapper.map(received(), heard_at=0).row["queue"] == "billing"


def test_task_started_is_no_row_but_the_end_of_the_run_says_when_it_started() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), heard_at=0)
    assert mapper.map(task("task-started", T + 0.008, 5), heard_at=0).row is None
    row = mapper.map(task("task-succeeded", T + 0.01, 6, result="4"), heard_at=0).row
    assert attrs(row)["celery.started_at"] == pytest.approx(T + 0.008)


def test_task_failed_is_fail_with_the_exception_as_reason() -> None:
    row = CeleryEventMapper().map(
        task("task-failed", T, 9, exception="RuntimeError('kaput')", traceback="Traceback"),
        heard_at=0).row
    assert row["event"] == "fail"
    assert attrs(row)["reason"] == "RuntimeError('kaput')"
    assert attrs(row)["celery.traceback"] == "Traceback"


def test_a_child_lost_mid_run_is_a_fail_whose_reason_names_the_lost_worker() -> None:
    exception = "WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL) Job: 0.')"
    row = CeleryEventMapper().map(task("task-failed", T, 9, exception=exception),
                                  heard_at=0).row
    assert "WorkerLostError" in attrs(row)["reason"]


def test_task_retried_is_a_nack_with_its_reason() -> None:
    row = CeleryEventMapper().map(
        task("task-retried", T, 12, exception="ValueError('not yet')"), heard_at=0).row
    assert (row["event"], attrs(row)["reason"]) == ("nack", "ValueError('not yet')")
    assert "settled_by" not in attrs(row)  # the worker settled it itself


def test_task_rejected_is_a_nack_when_requeued_else_a_fail() -> None:
    mapper = CeleryEventMapper()
    assert mapper.map(task("task-rejected", T, 3, requeue=True), 0).row["event"] == "nack"
    assert mapper.map(task("task-rejected", T, 4, requeue=False), 0).row["event"] == "fail"


def test_a_requeue_ending_a_run_still_open_is_its_pool_process_lost() -> None:
    # acks_late + task_reject_on_worker_lost: Celery 5.7 sends task-rejected (requeue)
    # alone when the pool process running the task dies, no task-failed.
    mapper = CeleryEventMapper()
    mapper.map(received(), 0)
    mapper.map(task("task-started", T + 0.01, 5), 0)
    row = mapper.map(task("task-rejected", T + 2, 6, requeue=True), 0).row
    assert row["event"] == "nack"
    assert attrs(row)["reason"].startswith("WorkerLostError")
    assert mapper.unsettled() == {}


def test_a_requeue_noticed_after_a_redelivery_ends_the_run_that_was_running() -> None:
    # The pool process died; before the main process noticed, Redis's visibility timeout
    # handed the message out again, to another pool process of the same worker.
    mapper = CeleryEventMapper()
    first = mapper.map(received(), 0).row
    mapper.map(task("task-started", T + 0.01, 5), 0)
    second = mapper.map(received(at=T + 3, clock=6), 0).row
    mapper.map(task("task-started", T + 3.01, 7), 0)
    row = mapper.map(task("task-rejected", T + 3.5, 8, requeue=True), 0).row
    assert row["execution_id"] == first["event_uid"]
    assert attrs(row)["reason"].startswith("WorkerLostError")
    ack = mapper.map(task("task-succeeded", T + 3.6, 9, runtime=0.59), 0).row
    assert ack["execution_id"] == second["event_uid"]


def test_a_requeue_after_the_run_failed_is_no_lost_pool_process() -> None:
    # A hard time limit: task-failed first (the run ended), then the requeue.
    mapper = CeleryEventMapper()
    mapper.map(received(), 0)
    mapper.map(task("task-failed", T + 2, 6, exception="TimeLimitExceeded(5)"), 0)
    row = mapper.map(task("task-rejected", T + 2.001, 7, requeue=True), 0).row
    assert (row["event"], attrs(row)["reason"]) == ("nack", "rejected, requeued")


def test_task_revoked_is_a_fail_that_says_how() -> None:
    row = CeleryEventMapper().map(
        task("task-revoked", T, 3, terminated=True, signum=15, expired=False), 0).row
    assert (row["event"], attrs(row)["reason"]) == ("fail", "revoked: terminated by signal 15")


def test_worker_online_and_offline_are_worker_start_and_stop() -> None:
    mapper = CeleryEventMapper()
    online = mapper.map({**heartbeat(T, 1), "type": "worker-online"}, 0).row
    offline = mapper.map({**heartbeat(T + 9, 19), "type": "worker-offline"}, 0).row
    assert (online["event"], offline["event"]) == ("worker_start", "worker_stop")
    assert online["worker_id"] == "w1@billing:11460"
    assert attrs(online)["celery.sw_ver"] == "5.7.0"


def test_heartbeats_are_no_rows() -> None:
    mapped = CeleryEventMapper().map(heartbeat(T, 2), heard_at=0)
    assert mapped.rows() == []


def test_the_same_event_twice_has_one_uid_and_another_event_another() -> None:
    mapper = CeleryEventMapper()
    first = mapper.map(received(), 0).row["event_uid"]
    again = CeleryEventMapper().map(received(), 5).row["event_uid"]
    redelivered = mapper.map(received(at=T + 30, clock=40), 0).row["event_uid"]
    assert first == again
    assert redelivered != first


def test_a_worker_going_offline_with_a_task_nacks_it_on_its_behalf() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), 0)
    mapper.map(task("task-started", T + 0.01, 5), 0)
    lost = mapper.map({**heartbeat(T + 3, 9), "type": "worker-offline"}, 3).lost
    assert [(r["event"], r["job_id"], r["worker_id"]) for r in lost] == [
        ("nack", UUID, "w1@billing:11460")]
    assert attrs(lost[0])["settled_by"] == RECEIVER
    assert attrs(lost[0])["reason"].startswith("WorkerLost: worker w1@billing:11460 went "
                                               "offline while running")


def test_a_worker_offline_after_settling_its_tasks_nacks_nothing() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), 0)
    mapper.map(task("task-succeeded", T + 0.01, 6), 0)
    assert mapper.map({**heartbeat(T + 3, 9), "type": "worker-offline"}, 3).lost == []


def test_a_worker_silent_past_twice_its_heartbeat_interval_loses_its_tasks() -> None:
    mapper = CeleryEventMapper()
    mapper.map(heartbeat(T, 2), heard_at=100.0)
    mapper.map(received(at=T + 1), heard_at=101.0)
    assert mapper.expire(now=104.9) == []  # within 2 x 2 s of the last sign of life
    lost = mapper.expire(now=105.1)
    assert [r["job_id"] for r in lost] == [UUID]
    assert "missed its heartbeats" in attrs(lost[0])["reason"]
    assert lost[0]["ts"] == 1_796_156_227_000_000  # when it was last heard of, not later
    assert mapper.expire(now=200.0) == []  # reported once


def test_a_receiver_behind_the_stream_does_not_judge_a_worker_it_has_not_read() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(at=T), heard_at=100.0)
    # Other events keep coming, but not yet past w1's window on the stream's own clock.
    mapper.map(heartbeat(T + 3, 1, hostname="w2@billing", pid=7), heard_at=110.0)
    assert mapper.expire(now=110.0, caught_up=False) == []
    mapper.map(heartbeat(T + 5, 2, hostname="w2@billing", pid=7), heard_at=110.5)
    assert [r["job_id"] for r in mapper.expire(now=110.5, caught_up=False)] == [UUID]


def test_silence_while_the_receiver_was_cut_off_does_not_count() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), heard_at=100.0)
    mapper.grace(now=130.0)
    assert mapper.expire(now=131.0) == []


def test_a_host_speaking_under_a_new_pid_lost_the_old_process_and_its_tasks() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), heard_at=0)
    lost = mapper.map({**heartbeat(T + 2, 1, pid=22222), "type": "worker-online"}, 1).lost
    assert [(r["job_id"], r["worker_id"]) for r in lost] == [(UUID, "w1@billing:11460")]
    assert "replaced by w1@billing:22222" in attrs(lost[0])["reason"]


def test_one_lost_task_is_one_uid_however_the_loss_is_noticed() -> None:
    offline, silent = CeleryEventMapper(), CeleryEventMapper()
    for mapper in (offline, silent):
        mapper.map(received(), heard_at=0)
    by_offline = offline.map({**heartbeat(T + 3, 9), "type": "worker-offline"}, 1).lost
    by_silence = silent.expire(now=60)
    assert by_offline[0]["event_uid"] == by_silence[0]["event_uid"]


def test_forgetting_unsettled_tasks_reports_none_lost() -> None:
    mapper = CeleryEventMapper()
    mapper.map(received(), heard_at=0)
    mapper.forget_unsettled()
    assert mapper.expire(now=60) == []


def test_task_names_are_remembered_up_to_a_bound() -> None:
    mapper = CeleryEventMapper(known_tasks=2)
    for i in range(3):
        mapper.map(sent(uuid=f"t{i}", clock=i), 0)
    assert mapper.map(task("task-succeeded", T, 9, uuid="t0"), 0).row["job_type"] is None
    assert mapper.map(task("task-succeeded", T, 9, uuid="t2"), 0).row["job_type"] == (
        "billing.charge")


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([1, 2], "an event must be an object"),
        ({**WORKER, "timestamp": T}, "no type"),
        ({"type": "task-received", "uuid": UUID, "timestamp": T}, "no hostname"),
        (task("task-succeeded", T, 1, uuid=None), "no uuid"),
        ({**task("task-succeeded", T, 1), "timestamp": "yesterday"}, "Unix seconds"),
        ({**task("task-succeeded", T, 1), "timestamp": float("nan")}, "finite"),
        ({**task("task-succeeded", T, 1), "timestamp": 1e300}, "out of range"),
        ({**received(), "uuid": 7}, "uuid must be a string"),
        ({**received(), "retries": "many"}, "retries must be an integer"),
    ],
)
def test_a_malformed_event_is_refused_saying_what_is_wrong(event, message) -> None:
    with pytest.raises(RecordError, match=message):
        CeleryEventMapper().map(event, heard_at=0)


def test_an_unknown_event_type_is_no_row() -> None:
    assert CeleryEventMapper().map({**WORKER, "type": "custom-audit", "timestamp": T},
                                   0).rows() == []


def test_a_keyword_argument_named_as_the_key_is_the_idempotency_key() -> None:
    mapper = CeleryEventMapper(key_kwargs=("invoice_id", "order_id"))
    kwargs = "{'order_id': 'o-17', 'amount': 5}"
    enqueue = mapper.map({**sent(), "kwargs": kwargs}, 0).row
    deliver = mapper.map({**received(), "kwargs": kwargs}, 0).row
    assert enqueue["idempotency_key"] == deliver["idempotency_key"] == "o-17"


@pytest.mark.parametrize("kwargs", ["{}", "{'order_id': <Order 17>}", "{'order_id': 'o-1",
                                    "{'order_id': None}", "{'order_id': ['o-1']}", "[1]"])
def test_kwargs_without_a_literal_key_give_none(kwargs: str) -> None:
    row = CeleryEventMapper(key_kwargs=("order_id",)).map({**sent(), "kwargs": kwargs}, 0).row
    assert row["idempotency_key"] is None


def test_each_end_names_the_delivery_it_ends_when_one_worker_holds_a_task_twice() -> None:
    """Redelivered to the worker's other pool process while the first run goes on: the
    redelivery ends first, and each task-succeeded's runtime says which run it ends."""
    mapper = CeleryEventMapper()
    first = mapper.map(received(), heard_at=0).row
    second = mapper.map(received(at=T + 3, clock=8), heard_at=0).row
    rows = [mapper.map(task("task-succeeded", at, clock, result="'ok'", runtime=runtime),
                       heard_at=0).row
            for at, clock, runtime in ((T + 3.02, 9, 0.01), (T + 3.4, 10, 3.39))]
    assert first["execution_id"] == first["event_uid"]
    assert [r["execution_id"] for r in rows] == [second["event_uid"], first["event_uid"]]
    assert mapper.unsettled() == {}
