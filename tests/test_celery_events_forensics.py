"""Rows of the Celery event mapping, read by the forensics queries (on DuckDB and chDB):
what the receiver's choices mean for `duplicates`."""

from __future__ import annotations

from support.celery_events import T, heartbeat, received, task

from collectors.arrow_batch import rows_to_table
from collectors.celery_events import CeleryEventMapper
from queries.forensics import duplicates

W2 = {"hostname": "w2@billing", "pid": 5151}


def test_a_job_whose_ack_came_after_a_receiver_restart_keeps_its_job_type(store) -> None:
    before, after = CeleryEventMapper(), CeleryEventMapper()  # the restart: names forgotten
    rows = [before.map(received(), 0).row,
            after.map(task("task-succeeded", T + 1, 6), 0).row,
            after.map(received(at=T + 5, clock=9), 0).row]
    assert rows[1]["job_type"] is None
    store.write(rows_to_table(rows))
    [duplicate] = duplicates(store).to_dict("records")
    assert (duplicate["job_type"], duplicate["cause"]) == ("billing.charge", "broker_redelivery")


def test_a_lost_worker_settled_before_the_loss_was_noticed_is_no_overlap(store) -> None:
    """RabbitMQ hands the task to w2 at once; the receiver notices w1's silence seconds
    later. The nack is dated when w1 was last heard of, before w2's deliver: a crash,
    not a run still going when the redelivery came."""
    mapper = CeleryEventMapper()
    rows = [mapper.map(received(), heard_at=100.0).row]
    mapper.map(task("task-started", T + 0.01, 5), heard_at=100.0)
    mapper.map(heartbeat(T + 1, 6), heard_at=101.0)
    rows.append(mapper.map(received(at=T + 1.5, clock=2, **W2), heard_at=101.5).row)
    rows += mapper.expire(now=105.5)  # w1: nothing for 4.5 s
    rows.append(mapper.map(task("task-succeeded", T + 2, 3) | W2, heard_at=106.0).row)
    assert [r["event"] for r in rows] == ["deliver", "deliver", "nack", "ack"]
    store.write(rows_to_table(rows))
    [duplicate] = duplicates(store).to_dict("records")
    assert duplicate["cause"] == "worker_crash"


def test_a_redelivery_to_the_same_worker_while_the_first_run_goes_on_is_a_visibility_timeout(
    store,
) -> None:
    mapper = CeleryEventMapper()
    rows = [mapper.map(received(), 0).row, mapper.map(received(at=T + 3, clock=8), 0).row]
    rows.append(mapper.map(task("task-succeeded", T + 3.02, 9, runtime=0.01), 0).row)
    rows.append(mapper.map(task("task-succeeded", T + 3.4, 10, runtime=3.39), 0).row)
    store.write(rows_to_table(rows))
    [duplicate] = duplicates(store).to_dict("records")
    assert duplicate["cause"] == "visibility_timeout"


def test_a_pool_process_killed_under_acks_late_and_reject_on_worker_lost_is_a_crash(
    store,
) -> None:
    """Celery sends task-rejected (requeue) and runs the task again: a worker crash, not
    a retry after the run's own failure."""
    mapper = CeleryEventMapper()
    rows = [mapper.map(received(), 0).row]
    mapper.map(task("task-started", T + 0.01, 5), 0)
    rows.append(mapper.map(task("task-rejected", T + 2, 6, requeue=True), 0).row)
    rows.append(mapper.map(received(at=T + 2.01, clock=7), 0).row)
    rows.append(mapper.map(task("task-succeeded", T + 2.1, 8, runtime=0.05), 0).row)
    store.write(rows_to_table(rows))
    [duplicate] = duplicates(store).to_dict("records")
    assert (duplicate["cause"], duplicate["causes"]) == ("worker_crash", ["worker_crash"])
    assert duplicate["outcome"] == "unknown"  # the stream says nothing of effects


def test_a_pool_process_lost_after_the_broker_handed_its_message_out_again_is_a_crash(
    store,
) -> None:
    """The kill is noticed after Redis's visibility timeout restored the message: the
    rejection settles the dead run, and the second run is a worker crash's."""
    mapper = CeleryEventMapper()
    rows = [mapper.map(received(), 0).row]
    mapper.map(task("task-started", T + 0.01, 5), 0)
    rows.append(mapper.map(received(at=T + 3, clock=6), 0).row)
    mapper.map(task("task-started", T + 3.01, 7), 0)
    rows.append(mapper.map(task("task-rejected", T + 3.5, 8, requeue=True), 0).row)
    rows.append(mapper.map(task("task-succeeded", T + 3.6, 9, runtime=0.59), 0).row)
    store.write(rows_to_table(rows))
    [duplicate] = duplicates(store).to_dict("records")
    assert "worker_crash" in duplicate["causes"]
