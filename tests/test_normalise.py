"""The contract model: every alias of CONTRACT.md, a user mapping, attrs, event_uid."""

from pathlib import Path

import orjson
import pytest

from collectors.jsonlines import decode_lines
from collectors.mapping import FieldMapping, MappingError
from collectors.normalise import Normaliser, RecordError, flatten

TS = "2025-11-30T12:00:00Z"


def normalise(record: dict, normaliser: Normaliser | None = None) -> dict:
    return (normaliser or Normaliser()).normalise(flatten(record), uid="u", source="test")


def test_canonical_fields_pass_through() -> None:
    row = normalise(
        {
            "ts": TS,
            "event": "deliver",
            "job_id": "j1",
            "job_type": "billing.charge",
            "idempotency_key": "inv-1",
            "delivery_attempt": 2,
            "worker_id": "host:1",
            "visibility_timeout_ms": 30000,
        }
    )
    assert (row["event"], row["job_id"], row["idempotency_key"]) == ("deliver", "j1", "inv-1")
    assert row["delivery_attempt"] == 2 and row["visibility_timeout_ms"] == 30000
    assert row["attrs"] is None


def test_job_prefixed_names_are_canonical() -> None:
    row = normalise({"ts": TS, "job.event": "ack", "job.job_id": "j1", "job.idempotency_key": "k"})
    assert (row["event"], row["job_id"], row["idempotency_key"]) == ("ack", "j1", "k")


def test_nested_objects_read_as_dotted_names() -> None:
    row = normalise({"ts": TS, "job": {"event": "ack", "job_id": "j1"}})
    assert (row["event"], row["job_id"]) == ("ack", "j1")


@pytest.mark.parametrize("name", ["messaging.message.id", "messaging.message_id"])
def test_messaging_message_id_is_job_id(name: str) -> None:
    assert normalise({"ts": TS, "event": "ack", name: "m-1"})["job_id"] == "m-1"


@pytest.mark.parametrize("name", ["messaging.destination.name", "messaging.destination"])
def test_messaging_destination_is_queue(name: str) -> None:
    assert normalise({"ts": TS, "event": "ack", "job_id": "j", name: "emails"})["queue"] == "emails"


def test_celery_task_name_is_job_type() -> None:
    row = normalise({"ts": TS, "event": "ack", "job_id": "j", "celery.task_name": "mail.send"})
    assert row["job_type"] == "mail.send"


@pytest.mark.parametrize(
    ("operation", "event"),
    [
        ("create", "enqueue"),
        ("send", "enqueue"),
        ("publish", "enqueue"),
        ("receive", "deliver"),
        ("process", "deliver"),
        ("deliver", "deliver"),
        ("settle", "ack"),
    ],
)
def test_messaging_operation_names_the_event(operation: str, event: str) -> None:
    for key in ("messaging.operation.type", "messaging.operation"):
        assert normalise({"ts": TS, "job_id": "j", key: operation})["event"] == event


@pytest.mark.parametrize(
    "name",
    [
        "messaging.gcp_pubsub.message.delivery_attempt",
        "messaging.servicebus.message.delivery_count",
        "aws.sqs.approximate_receive_count",
        "ApproximateReceiveCount",
    ],
)
def test_broker_delivery_counts_are_delivery_attempt(name: str) -> None:
    assert (
        normalise({"ts": TS, "event": "deliver", "job_id": "j", name: 3})["delivery_attempt"] == 3
    )


def test_celery_retries_plus_one_is_delivery_attempt() -> None:
    row = normalise({"ts": TS, "event": "deliver", "job_id": "j", "celery.retries": 2})
    assert row["delivery_attempt"] == 3


@pytest.mark.parametrize("name", ["timestamp", "time", "@timestamp"])
def test_timestamp_aliases(name: str) -> None:
    assert normalise({name: TS, "event": "ack", "job_id": "j"})["ts"] == 1_764_504_000_000_000


def test_unknown_fields_and_message_are_kept_in_attrs() -> None:
    row = normalise(
        {
            "ts": TS,
            "event": "nack",
            "job_id": "j",
            "msg": "retrying",
            "reason": "WorkerLostError",
            "wait_ms": 12,
        }
    )
    assert orjson.loads(row["attrs"]) == {
        "msg": "retrying",
        "reason": "WorkerLostError",
        "wait_ms": 12,
    }


def test_aliases_do_not_linger_in_attrs() -> None:
    row = normalise({"timestamp": TS, "job.event": "ack", "messaging.message.id": "j"})
    assert row["attrs"] is None


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"event": "ack", "job_id": "j"}, "no timestamp"),
        ({"ts": TS, "job_id": "j"}, "no event"),
        ({"ts": TS, "event": "teleport", "job_id": "j"}, "unknown event 'teleport'"),
        ({"ts": TS, "event": "deliver"}, "needs a job_id"),
        ({"ts": TS, "event": "deliver", "job_id": "j", "delivery_attempt": "two"}, "integer"),
        ({"ts": TS, "event": "deliver", "job_id": "j", "delivery_attempt": 0}, ">= 1"),
        ({"ts": "soon", "event": "ack", "job_id": "j"}, "RFC 3339"),
    ],
)
def test_bad_records_are_refused_with_a_reason(record: dict, reason: str) -> None:
    with pytest.raises(RecordError, match=reason):
        normalise(record)


def test_events_without_a_job_need_no_job_id() -> None:
    row = normalise({"ts": TS, "event": "worker_start", "worker_id": "w", "service_version": "v2"})
    assert row["service_version"] == "v2" and "job_id" not in row


def test_mapping_file_names_user_fields(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.toml"
    mapping.write_text(
        '[fields]\nts = "when"\njob_id = "task.uuid"\nidempotency_key = ["order_id", "key"]\n'
        '[events]\n"task-received" = "deliver"\n'
    )
    normaliser = Normaliser(FieldMapping.load(mapping))
    row = normalise(
        {
            "when": 1_764_504_000,
            "state": "x",
            "task": {"uuid": "t-1"},
            "key": "k-9",
            "event": "task-received",
        },
        normaliser,
    )
    assert (row["job_id"], row["idempotency_key"], row["event"]) == ("t-1", "k-9", "deliver")
    assert orjson.loads(row["attrs"]) == {"state": "x"}


def test_broken_mapping_file_is_reported(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.toml"
    mapping.write_text("[fields]\nts = 3\n")
    with pytest.raises(MappingError, match="mapping.toml"):
        FieldMapping.load(mapping)


def test_event_uid_is_the_same_for_the_same_line_and_differs_otherwise() -> None:
    line = b'{"ts":"2025-11-30T12:00:00Z","event":"ack","job_id":"j"}'
    other = b'{"ts":"2025-11-30T12:00:01Z","event":"ack","job_id":"j"}'
    first = decode_lines([(1, line), (2, other)], Normaliser(), "a.jsonl").rows
    again = decode_lines([(7, line)], Normaliser(), "b.jsonl").rows
    assert first[0]["event_uid"] == again[0]["event_uid"]
    assert first[0]["event_uid"] != first[1]["event_uid"]


def test_a_bad_line_among_good_ones_is_reported_and_the_rest_kept() -> None:
    lines = [
        (1, b'{"ts":"2025-11-30T12:00:00Z","event":"deliver","job_id":"j"}'),
        (2, b'{"ts":"2025-11-30T12:00:0'),
        (3, b"[1, 2]"),
        (4, b'{"ts":"2025-11-30T12:00:01Z","event":"ack","job_id":"j"}'),
    ]
    decoded = decode_lines(lines, Normaliser(), "worker.log")
    assert [r["event"] for r in decoded.rows] == ["deliver", "ack"]
    assert [r.where for r in decoded.rejected] == ["worker.log:2", "worker.log:3"]
    assert "invalid JSON" in decoded.rejected[0].reason
    assert "expected an object" in decoded.rejected[1].reason
