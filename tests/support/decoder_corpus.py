"""Each source's corpus: the bodies its decoders are held to, built here from the requests
and log lines the decoder tests read (tests/support/), never from benchmarks/.

A new source registered in collectors/decoders brings its corpus here: a test fails for
a source without one.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from support.arq_log_lines import EXPIRED_TRY, LONG, RETRIED, STARTING, TIMED_OUT
from support.celery_log_lines import ADD, BANNER, BROKEN, CRASH, FLAKY, SLOW, UNACKED
from support.json_lines_corpus import corpus as lines_corpus
from support.otlp_spans import T, job_span, key_value, mixed_request, str_attr
from support.rq_log_lines import FAILED, KILLED, OK, STARTED
from support.sidekiq_log_lines import PUSHED_BACK, RERUN
from support.sidekiq_log_lines import RETRIED as SIDEKIQ_RETRIED

Body = tuple[str, bytes]  # (name, body)


def _traces() -> list[tuple[str, object]]:
    steps = [("lock_acquire", T), ("side_effect", T + 1), ("log", T + 2), ("ack", T + 3)]
    return [
        *[(f"mixed-{seed}", mixed_request(seed)) for seed in range(3)],
        ("steps-without-attributes",
         job_span("process", steps, str_attr("messaging.message.id", "m-1"),
                  str_attr("job.job_type", "charge"))),
        ("no-job-id", job_span("deliver", [("ack", T)], str_attr("job.job_type", "charge"))),
    ]


def _logs() -> list[tuple[str, ExportLogsServiceRequest]]:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.extend(
        [key_value("host.name", "h"), key_value("process.pid", 7)])
    scope = resource_logs.scope_logs.add()
    bodies = [
        {"event": "deliver", "job_id": "j-1", "delivery_attempt": 2},
        {"event": "ack", "job_id": "j-1"},
        {"event": "ack"},  # no job_id: refused
        "a text body, kept as msg",
    ]
    for i, body in enumerate(bodies):
        record = scope.log_records.add()
        record.time_unix_nano = T + i
        record.trace_id, record.span_id = bytes([i + 1]) * 16, bytes([i + 1]) * 8
        if isinstance(body, dict):
            record.body.kvlist_value.values.extend(key_value(k, v) for k, v in body.items())
        else:
            record.body.CopyFrom(AnyValue(string_value=body))
            record.attributes.append(KeyValue(key="event", value=AnyValue(string_value="fail")))
            record.attributes.append(key_value("job_id", "j-2"))
    return [("records", request)]


def _protobuf(messages: list) -> list[Body]:
    return [(name, message.SerializeToString()) for name, message in messages]


def _json(messages: list) -> list[Body]:
    return [(name, json_format.MessageToJson(message).encode()) for name, message in messages]


_NOT_A_BODY = {"protobuf": b"\xff\xff\xff", "json": b"{not json", "ndjson": b"", "text": b""}


def _lines() -> list[Body]:
    lines = lines_corpus(400, seed=5)
    return [
        ("logs", b"\n".join(lines)),
        ("logs-crlf", b"\r\n".join(lines[:50])),
    ]


def _celery_log() -> list[Body]:
    unreadable = (
        b"[2026-12-01 20:26:40,000: INFO/MainProcess] Task celery_log_app.add[e752fc26 received\n"
        b"[2026-12-01 25:26:40,000: INFO/MainProcess] Task celery_log_app.add[e7] received\n"
    )
    return [
        ("worker", BANNER + ADD + FLAKY + BROKEN),
        ("lost-process", CRASH),
        ("redelivered", SLOW + UNACKED),
        ("unreadable-lines", ADD + unreadable),
        ("empty", _NOT_A_BODY["text"]),
    ]


def _sidekiq_log() -> list[Body]:
    unreadable = b"2026-12-05T08:00:45.240Z pid=1 class=ChargeJob jid=j1 INFO: start\n"
    return [
        ("retried", SIDEKIQ_RETRIED),
        ("pushed-back", PUSHED_BACK + RERUN),
        ("unreadable-lines", RERUN + unreadable),
        ("empty", _NOT_A_BODY["text"]),
    ]


def _rq_log() -> list[Body]:
    cut = (b"07:57:17 Worker w: q1: billing.charge('o-9') (1444b2\n"
           b"07:61:17 Worker w: q1: Job OK (x)\n")
    return [("worker", STARTED + OK + FAILED + KILLED), ("unreadable-lines", OK + cut),
            ("empty", _NOT_A_BODY["text"])]


def _arq_log() -> list[Body]:
    cut = "08:01:45:   0.12s → 2b04d2efb1a74253a5262\n".encode()
    return [("worker", STARTING + RETRIED + TIMED_OUT + EXPIRED_TRY + LONG),
            ("unreadable-lines", RETRIED + cut), ("empty", _NOT_A_BODY["text"])]


def _dramatiq_log() -> list[Body]:
    head = b"[2026-12-05 08:08:15,524] [PID 3338] [Thread-4] "
    run = (
        head + b"[dramatiq.worker.WorkerThread] [DEBUG] Received message charge('k1') "
        b"with id 'd444d513'.\n"
        + head + b"[dramatiq.middleware.retries.Retries] [INFO] Retrying message 'd444d513' "
        b"in 181 milliseconds.\n"
        + head + b"[dramatiq.worker.ConsumerThread(q)] [DEBUG] Acknowledging message "
        b"'d444d513'.\n"
    )
    unreadable = head + b"[dramatiq.worker.WorkerThread] [DEBUG] Received message charge()\n"
    return [("worker", run), ("unreadable-lines", run + unreadable),
            ("empty", _NOT_A_BODY["text"])]


CORPUS: dict[tuple[str, str], Callable[[], list[Body]]] = {
    ("traces", "protobuf"): lambda: _protobuf(_traces()) + [("bad", _NOT_A_BODY["protobuf"])],
    ("traces", "json"): lambda: _json(_traces()) + [("bad", _NOT_A_BODY["json"])],
    ("logs", "protobuf"): lambda: _protobuf(_logs()) + [("bad", _NOT_A_BODY["protobuf"])],
    ("logs", "json"): lambda: _json(_logs()) + [("bad", _NOT_A_BODY["json"])],
    ("lines", "ndjson"): _lines,
    ("celery-log", "text"): _celery_log,
    ("sidekiq-log", "text"): _sidekiq_log,
    ("rq-log", "text"): _rq_log,
    ("arq-log", "text"): _arq_log,
    ("dramatiq-log", "text"): _dramatiq_log,
}


def bodies(signal: str, media: str) -> list[Body]:
    return CORPUS[(signal, media)]()


def json_objects(values: list[str | None]) -> list[object]:
    """`attrs` as the objects they spell: decoders may order an object's keys alike."""
    return [orjson.loads(v) if v is not None else None for v in values]
