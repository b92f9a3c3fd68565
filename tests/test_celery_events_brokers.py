"""Celery's event stream from real brokers (Redis and RabbitMQ) and real prefork workers
started with -E, into an embedded store; `dupescope duplicates` reads what it made."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from celery_broker_support import AMQP_URL, REDIS_URL, Broker, Worker, new_broker, wait_for
from click.testing import CliRunner

from collectors.celery_events import RECEIVER
from collectors.service.celery_source import CeleryEventSource
from collectors.service.collector import Collector
from dupescope.cli import main
from store.embedded import EmbeddedStore

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A corner of each real broker, shared by the tests of this module that leave its
    worker running."""
    corner = new_broker(REDIS_URL if request.param == "redis" else AMQP_URL)
    yield corner
    corner.cleanup()


@pytest.fixture
def redis_only(broker: Broker) -> None:
    if not broker.url.startswith("redis"):
        pytest.skip("RabbitMQ redelivers only when the consumer is gone")


@pytest.fixture
def amqp_only(broker: Broker) -> None:
    if not broker.url.startswith("amqp"):
        pytest.skip("Redis PUB/SUB keeps no events for an absent receiver")


@pytest.fixture
def own_broker(broker: Broker) -> Iterator[Broker]:
    """A corner of the same broker for one test, whose workers it may kill."""
    corner = new_broker(broker.url)
    yield corner
    corner.cleanup()


class Receiving:
    """A store, its collector and one event source on `broker`, in this process."""

    def __init__(self, root: Path, broker: Broker) -> None:
        self.root = root
        self.broker = broker
        self.store = EmbeddedStore(root)
        self.collector = Collector(self.store)
        self.queue = f"{broker.exchange}.receiver-{uuid.uuid4().hex[:8]}"
        self.source: CeleryEventSource | None = None
        self.start()

    def start(self) -> CeleryEventSource:
        self.source = CeleryEventSource(
            self.collector, self.broker.url, exchange=self.broker.exchange,
            queue_name=self.queue, key_kwargs=("order_id",),
        ).start()
        assert self.source.connected.wait(10), "the receiver did not connect"
        return self.source

    def stop_source(self) -> None:
        if self.source is not None:
            self.source.stop()
            self.source = None

    def close(self) -> None:
        self.stop_source()
        self.collector.close()
        self.store.close()
        self.broker.delete_queue(self.queue)

    def rows(self, job_id: str | None = None) -> list[dict]:
        sql = ("SELECT event, job_id, job_type, worker_id, attrs, event_uid FROM events "
               + ("WHERE job_id = $job_id " if job_id else "") + "ORDER BY ts, event")
        frame = self.store.execute(sql, {"job_id": job_id} if job_id else None)
        return frame.to_dict("records")

    def events(self, job_id: str) -> list[str]:
        """The job's rows' kinds, sorted: Celery stamps task-sent after it published the
        task, so a quick worker's deliver can come a few ms before its enqueue."""
        return sorted(row["event"] for row in self.rows(job_id))

    def wait_online(self, worker: Worker) -> None:
        wait_for(lambda: any(r["event"] == "worker_start"
                             and r["worker_id"].startswith(worker.hostname)
                             for r in self.rows()),
                 30, f"{worker.hostname} online\n{worker.output()}")

    def duplicates(self) -> list[dict]:
        result = CliRunner().invoke(
            main, ["--store", str(self.root), "duplicates", "--format", "json"])
        assert result.exit_code == 0, result.output
        return orjson.loads(result.output)


@pytest.fixture
def receiving(tmp_path: Path, broker: Broker) -> Iterator[Receiving]:
    setup = Receiving(tmp_path / "store", broker)
    yield setup
    setup.close()


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Worker]:
    started = Worker(tmp_path_factory.mktemp("worker"), broker, "w1@events-test")
    wait_for(started.ready, 30, f"the worker\n{started.output()}")
    yield started
    started.stop()


@pytest.fixture
def receiving_own(tmp_path: Path, own_broker: Broker) -> Iterator[Receiving]:
    setup = Receiving(tmp_path / "own-store", own_broker)
    yield setup
    setup.close()


@pytest.fixture
def own_worker(tmp_path: Path, own_broker: Broker, receiving_own: Receiving) -> Iterator[Worker]:
    started = Worker(tmp_path / "worker", own_broker, "w1@own-test")
    receiving_own.wait_online(started)
    yield started
    started.stop()


def test_a_task_is_its_enqueue_deliver_and_ack_named_and_placed(
    broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    job = broker.app().send_task("tests.double", args=(21,))
    wait_for(lambda: "ack" in receiving.events(job.id), 20, "the ack")
    rows = {r["event"]: r for r in receiving.rows(job.id)}
    assert sorted(rows) == ["ack", "deliver", "enqueue"]
    assert {r["job_type"] for r in rows.values()} == {"tests.double"}
    assert rows["deliver"]["worker_id"] == f"w1@events-test:{worker.process.pid}"
    assert orjson.loads(rows["ack"]["attrs"])["celery.result"] == "42"
    assert receiving.duplicates() == []


def only_duplicate(receiving: Receiving) -> tuple[str, int, str]:
    """The one duplicate in the receiving store: its key, executions and cause. A new
    reader's answer may trail the rows just read by a moment; what it lacks after
    seconds is a fault, and the rows say which."""
    try:
        [duplicate] = wait_for(lambda: receiving.duplicates(), 10, "the duplicate")
    except (AssertionError, ValueError) as failed:
        rows = [(r["event"], r["job_id"], r["worker_id"]) for r in receiving.rows()]
        raise AssertionError(f"{failed}; duplicates {receiving.duplicates()}; rows {rows}") \
            from failed
    return duplicate["key"], duplicate["executions"], duplicate["cause"]


def test_a_retry_is_a_nack_then_a_second_execution(
    broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    job = broker.app().send_task("tests.flaky")
    wait_for(lambda: "ack" in receiving.events(job.id), 20, "the retried run's ack")
    assert receiving.events(job.id) == ["ack", "deliver", "deliver", "enqueue", "enqueue",
                                        "nack"]
    [duplicate] = receiving.duplicates()
    assert (duplicate["key"], duplicate["cause"]) == (job.id, "retry_after_failure")


def test_a_message_delivered_again_after_its_ack_is_a_broker_redelivery(
    broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    app = broker.app()
    job = app.send_task("tests.double", args=(1,))
    wait_for(lambda: "ack" in receiving.events(job.id), 20, "the first ack")
    app.send_task("tests.double", args=(1,), task_id=job.id)  # the same message again
    wait_for(lambda: receiving.events(job.id).count("ack") == 2, 20, "the second ack")
    assert only_duplicate(receiving) == (job.id, 2, "broker_redelivery")


def test_an_order_sent_twice_as_two_tasks_is_a_producer_retry(
    broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    app = broker.app()
    jobs = [app.send_task("tests.charge", kwargs={"order_id": "o-17"}) for _ in range(2)]
    for job in jobs:
        wait_for(lambda job=job: "ack" in receiving.events(job.id), 20, "both acks")
    [duplicate] = receiving.duplicates()
    assert (duplicate["key"], duplicate["cause"]) == ("o-17", "producer_retry")
    assert sorted(duplicate["job_ids"]) == sorted(job.id for job in jobs)


def test_a_worker_killed_mid_task_is_settled_as_lost_and_its_redelivery_a_worker_crash(
    tmp_path: Path, own_broker: Broker, receiving_own: Receiving, own_worker: Worker
) -> None:
    broker, receiving, worker = own_broker, receiving_own, own_worker
    job = broker.app().send_task("tests.charge_slowly", args=("order-7",))
    marks = tmp_path / "worker" / "marks"
    wait_for(lambda: (marks / "order-7").exists(), 20, "the task to start")
    wait_for(lambda: receiving.source.mapper.unsettled(), 10, "its deliver to be read")
    worker.kill()
    lost = wait_for(lambda: [r for r in receiving.rows(job.id) if r["event"] == "nack"],
                    20, "the lost worker's nack")
    reason = orjson.loads(lost[0]["attrs"])
    assert reason["settled_by"] == RECEIVER
    assert f"w1@own-test:{worker.process.pid}" in reason["reason"]
    # Another worker gets the message back: at once from RabbitMQ, after the visibility
    # timeout from Redis.
    second = Worker(tmp_path / "worker", broker, "w2@own-test")
    try:
        wait_for(lambda: "ack" in receiving.events(job.id), 40,
                 f"the redelivered run's ack\n{second.output()}")
    finally:
        second.stop()
    assert only_duplicate(receiving) == (job.id, 2, "worker_crash")


def test_a_task_outliving_the_redis_visibility_timeout_is_a_visibility_timeout(
    redis_only: None, tmp_path: Path, own_broker: Broker, receiving_own: Receiving,
    own_worker: Worker,
) -> None:
    broker, receiving = own_broker, receiving_own
    second = Worker(tmp_path / "worker", broker, "w2@own-test")
    try:
        receiving.wait_online(second)
        # Longer than the 2 s visibility timeout and the 1 s between two restores.
        job = broker.app().send_task("tests.outlive", args=("order-9", 6))
        wait_for(lambda: receiving.events(job.id).count("ack") == 2, 40,
                 f"both runs' acks: {receiving.events(job.id)}")
    finally:
        second.stop()
    assert only_duplicate(receiving) == (job.id, 2, "visibility_timeout")


def test_a_dropped_connection_is_taken_up_again_and_no_event_counted_twice(
    broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    app = broker.app()
    before = app.send_task("tests.double", args=(2,))
    wait_for(lambda: "ack" in receiving.events(before.id), 20, "the first task's ack")
    source = receiving.source
    source.close_connection()
    wait_for(lambda: source.stats["connects"] == 2 and source.connected.is_set(), 20,
             "the reconnection")
    after = app.send_task("tests.double", args=(3,))
    wait_for(lambda: "ack" in receiving.events(after.id), 20, "the second task's ack")
    for job in (before, after):
        assert receiving.events(job.id) == ["ack", "deliver", "enqueue"]
    raw = receiving.store.execute("SELECT count(*) AS n, count(DISTINCT event_uid) AS u "
                                  "FROM events").to_dict("records")[0]
    assert raw["n"] == raw["u"]


def test_a_restarted_receiver_finds_what_was_sent_meanwhile_on_rabbitmq(
    amqp_only: None, broker: Broker, receiving: Receiving, worker: Worker
) -> None:
    app = broker.app()
    receiving.stop_source()
    jobs = [app.send_task("tests.double", args=(i,)) for i in range(5)]
    receiving.start()
    for job in jobs:
        wait_for(lambda job=job: "ack" in receiving.events(job.id), 20, "every ack")
        assert receiving.events(job.id) == ["ack", "deliver", "enqueue"]


def publish_events(broker: Broker, body: object) -> None:
    """One message on Celery's event exchange, as a worker sends it (a JSON list)."""
    from celery.events.event import get_exchange
    from kombu import Connection

    with Connection(broker.url, connect_timeout=5) as conn:
        exchange = get_exchange(conn, name=broker.exchange)
        conn.Producer().publish(body, exchange=exchange, routing_key="task.multi",
                                serializer="json", declare=[exchange])


def test_a_malformed_event_is_counted_and_the_rest_of_its_message_kept(
    broker: Broker, receiving: Receiving
) -> None:
    good = {"hostname": "w9@elsewhere", "pid": 9, "clock": 3, "uuid": "job-good",
            "name": "tests.double", "retries": 0, "timestamp": 1_796_156_226.5,
            "type": "task-received"}
    bad = {**good, "uuid": None, "clock": 4}
    publish_events(broker, [bad, "not an event", good])
    wait_for(lambda: receiving.events("job-good") == ["deliver"], 20, "the good event")
    source = receiving.source
    assert source.stats["malformed"] == 2
    assert receiving.collector.health()["rejected"] == 2
    publish_events(broker, [{**good, "uuid": "job-later", "clock": 5}])
    wait_for(lambda: receiving.events("job-later") == ["deliver"], 20, "a later event")
