"""RabbitMQ's Firehose trace messages (headers and body as RabbitMQ sends them) as
contract events: Dramatiq's and Celery's messages, their retries and redeliveries."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser, RecordError
from collectors.rabbitmq_firehose import FirehoseMapper

ID = "45bfcc33-0937-4b28-a6ac-af8dee5d7350"
PRODUCER = "127.0.0.1:43038 -> 127.0.0.1:5672"
WORKER_A = "127.0.0.1:47356 -> 127.0.0.1:5672"
WORKER_B = "127.0.0.1:47386 -> 127.0.0.1:5672"


def dramatiq_body(retries: int = 0, queue: str = "billing") -> bytes:
    options = {"retries": retries} if retries else {}
    return orjson.dumps({
        "queue_name": queue, "actor_name": "charge", "args": ["inv-7"],
        "kwargs": {"amount": 12}, "options": options, "message_id": ID,
        "message_timestamp": 1796459764107,
    })


def headers(connection: str, queue: str, redelivered: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "exchange_name": "", "routing_keys": [queue], "properties": {"delivery_mode": 2},
        "node": "rabbit@localhost", "vhost": "billing", "connection": connection,
        "channel": 1, "user": "guest",
    }
    if redelivered is not None:
        found["redelivered"] = redelivered
    return found


def mapper() -> FirehoseMapper:
    return FirehoseMapper(Normaliser(FieldMapping(fields={
        "idempotency_key": ("dramatiq.args.0", "celery.kwargs.invoice")
    })))


def test_a_publish_is_an_enqueue_with_the_actors_key() -> None:
    row = mapper().map("publish.", headers(PRODUCER, "billing"), dramatiq_body(), 1)
    assert row is not None
    assert (row["event"], row["job_id"], row["job_type"], row["queue"]) == (
        "enqueue", ID, "charge", "billing")
    assert row["idempotency_key"] == "inv-7"


def test_a_delivery_is_a_deliver_by_the_consumers_connection() -> None:
    row = mapper().map("deliver.billing", headers(WORKER_A, "billing", 0), dramatiq_body(), 2)
    assert row is not None
    assert (row["event"], row["worker_id"], row["delivery_attempt"]) == (
        "deliver", WORKER_A, 1)
    assert orjson.loads(row["attrs"])["rabbitmq.redelivered"] is False
    assert row["execution_id"] == row["event_uid"]


def test_a_retry_published_by_the_worker_is_a_nack_of_the_attempt_it_ran() -> None:
    firehose = mapper()
    first = firehose.map("deliver.billing", headers(WORKER_A, "billing", 0), dramatiq_body(), 2)
    nack = firehose.map("publish.", headers(WORKER_A, "billing.DQ"),
                        dramatiq_body(1, "billing.DQ"), 3)
    moved = firehose.map("publish.", headers(WORKER_B, "billing"), dramatiq_body(1), 4)
    second = firehose.map("deliver.billing", headers(WORKER_B, "billing", 0),
                          dramatiq_body(1), 5)
    assert first is not None and nack is not None and second is not None
    assert (nack["event"], nack["delivery_attempt"], nack["worker_id"]) == ("nack", 1, WORKER_A)
    assert nack["execution_id"] == first["execution_id"]
    assert moved is None  # out of the delay queue: no new enqueue, no second nack
    assert second["delivery_attempt"] == 2


def test_the_delay_queues_deliveries_run_nothing() -> None:
    row = mapper().map("deliver.billing.DQ", headers(WORKER_A, "billing.DQ", 0),
                       dramatiq_body(1, "billing.DQ"), 1)
    assert row is None


def test_a_celery_message_gives_its_task_id_name_and_retries() -> None:
    trace = headers(WORKER_A, "celery", 1)
    trace["properties"] = {"headers": {"id": "t-1", "task": "billing.charge", "retries": 2},
                           "content_type": "application/json"}
    body = orjson.dumps([[], {"invoice": "inv-9"}, {}])
    row = mapper().map("deliver.celery", trace, body, 1)
    assert row is not None
    assert (row["job_id"], row["job_type"], row["delivery_attempt"],
            row["idempotency_key"]) == ("t-1", "billing.charge", 3, "inv-9")


def test_a_message_of_neither_kind_is_ignored() -> None:
    assert mapper().map("publish.", headers(PRODUCER, "x"), b"plain text", 1) is None


def test_a_trace_message_with_a_routing_key_not_the_tracers_is_refused() -> None:
    with pytest.raises(RecordError, match="publish"):
        mapper().map("billing", headers(PRODUCER, "billing"), dramatiq_body(), 1)


def test_a_url_that_is_not_amqp_is_refused_before_anything_starts() -> None:
    from collectors.service.firehose_source import check_firehose_url

    check_firehose_url("amqp://guest:guest@127.0.0.1:5672/billing")
    with pytest.raises(ValueError, match="amqp:// URL is needed"):
        check_firehose_url("redis://127.0.0.1:6379/0")
