"""Spans shaped as opentelemetry-instrumentation-celery writes them -> contract rows.

The producer's `apply_async/<task>` span (PRODUCER) is an enqueue with no worker; the
worker's `run/<task>` span (CONSUMER) is one execution by the process that ran it, its attempt
`celery.retries + 1` (+ 1 when the transport says redelivered), settled at its end as
`celery.state` says. Every decoder path gives the same rows: the reference, the
column-wise one, the native one and OTLP/JSON. And from those rows alone, the forensics
name each duplicate's cause.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson
import pyarrow as pa
import pytest
from collect_support import otlp_json_line
from native_support import require_native
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import SpanKind
from support.celery_spans import PRODUCER, T0, TASK, WORKER, Process, publish, run

from collectors.arrow_batch import rows_to_table
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from collectors.otlp_columns import decode_traces_rows
from collectors.otlp_native import NativeTraceDecoder
from collectors.service.bodies import decode_otlp
from queries import duplicates
from store.schema import as_events

Decoded = tuple[pa.Table, list[str]]  # the rows, and where and why records were refused


def _reference(spans: list) -> Decoded:
    decoded = decode_traces(encode_spans(spans), Normaliser(), "src")
    return rows_to_table(decoded.rows), [f"{r.where}: {r.reason}" for r in decoded.rejected]


def _columns(spans: list) -> Decoded:
    rows, rejected, _ = decode_traces_rows(encode_spans(spans), Normaliser(), "src")
    return rows_to_table(rows), [f"{r.where}: {r.reason}" for r in rejected]


def _native(spans: list) -> Decoded:
    request = encode_spans(spans)
    table, rejected, _ = NativeTraceDecoder(Normaliser()).decode(
        request.SerializeToString(), lambda: request, "src")
    return as_events(table), [f"{r.where}: {r.reason}" for r in rejected]


def _otlp_json(spans: list) -> Decoded:
    result = decode_otlp("traces", otlp_json_line(spans), "json", Normaliser(), "src")
    return as_events(result.table), [result.message] if result.rejected else []


PATHS: dict[str, Callable[[list], Decoded]] = {
    "reference": _reference, "columns": _columns, "native": _native, "otlp-json": _otlp_json,
}
FIELDS = ("event", "job_id", "job_type", "delivery_attempt", "worker_id", "queue")


@pytest.fixture(params=sorted(PATHS))
def rows_of(request: pytest.FixtureRequest) -> Callable[[list], list[tuple]]:
    """The rows a decoder path gives for spans, as (event, job_id, ...) in time order."""
    decode = PATHS[request.param]

    def rows(spans: list) -> list[tuple]:
        table, rejected = decode(spans)
        assert not rejected, rejected
        found = sorted(table.to_pylist(), key=lambda r: (r["ts"], r["event"]))
        return [tuple(r[f] for f in FIELDS) for r in found]

    return rows


def test_the_producers_publish_span_is_an_enqueue_with_no_worker(rows_of) -> None:
    producer = Process(PRODUCER)
    publish(producer, "t-1")
    assert rows_of(producer.spans()) == [("enqueue", "t-1", TASK, None, None, "celery")]


def test_a_run_span_is_one_execution_by_the_celery_worker(rows_of) -> None:
    # Celery leaves celery.retries out while it is 0: still the first attempt.
    worker = Process(WORKER)
    run(worker, "t-1")
    assert rows_of(worker.spans()) == [
        ("deliver", "t-1", TASK, 1, "w1:4242", "celery"),
        ("ack", "t-1", TASK, 1, "w1:4242", "celery"),
    ]


def test_a_run_ends_as_celery_state_says(rows_of) -> None:
    worker = Process(WORKER)
    for i, state in enumerate(["SUCCESS", "IGNORED", "RETRY", "REJECTED", "FAILURE"]):
        run(worker, f"t-{i}", i, state=state)
    run(worker, "t-9", 9, state="STARTED")  # not an ending Celery writes: no settle
    settles = [(r[1], r[0]) for r in rows_of(worker.spans()) if r[0] != "deliver"]
    assert settles == [("t-0", "ack"), ("t-1", "ack"), ("t-2", "nack"), ("t-3", "nack"),
                       ("t-4", "fail")]


def test_a_settle_keeps_the_reason_celery_gave() -> None:
    worker = Process(WORKER)
    run(worker, "t-1", state="RETRY",
        **{"celery.retry.reason": "Retry in 0s: TimeoutError('gateway timeout')"})
    failed = worker.tracer.start_span(
        f"run/{TASK}", kind=SpanKind.CONSUMER, start_time=T0,
        attributes={"celery.action": "run", "celery.state": "FAILURE",
                    "messaging.message.id": "t-2", "celery.task_name": TASK})
    failed.record_exception(ValueError("no data for q3"), timestamp=T0 + 1)
    failed.end(end_time=T0 + 2)
    rows = decode_traces(encode_spans(worker.spans()), Normaliser(), "src").rows
    reasons = {r["job_id"]: orjson.loads(r["attrs"])["reason"] for r in rows
               if r["event"] in ("nack", "fail")}
    assert reasons == {"t-1": "Retry in 0s: TimeoutError('gateway timeout')",
                       "t-2": "ValueError: no data for q3"}


def test_a_run_that_names_its_own_settle_gets_no_second_one(rows_of) -> None:
    # dupescope's own Celery instrumentation writes its events onto the same span.
    worker = Process(WORKER)
    run(worker, "t-1", events=(("side_effect", 0.5), ("ack", 1)))
    run(worker, "t-2", 5, **{"job.event": "deliver"})
    assert [(r[1], r[0]) for r in rows_of(worker.spans())] == [
        ("t-1", "deliver"), ("t-1", "side_effect"), ("t-1", "ack"), ("t-2", "deliver")]


def test_a_task_published_and_run_is_one_enqueue_and_one_execution(rows_of) -> None:
    producer, worker = Process(PRODUCER), Process(WORKER)
    publish(producer, "t-1")
    run(worker, "t-1")
    assert [r[0] for r in rows_of(producer.spans() + worker.spans())] == [
        "enqueue", "deliver", "ack"]


def test_a_retry_counts_from_celery_retries_given_as_text(rows_of) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", 1, state="RETRY")
    run(worker, "t-1", 3, retries="1")
    assert [r[3] for r in rows_of(worker.spans()) if r[0] == "deliver"] == [1, 2]


def test_a_redelivered_run_is_at_least_the_next_attempt(rows_of) -> None:
    # The broker says it delivered the message before: an earlier attempt, seen or not.
    worker = Process(WORKER)
    run(worker, "t-1", redelivered=True)
    run(worker, "t-2", retries=2, redelivered=True)
    delivered = [(r[1], r[3]) for r in rows_of(worker.spans()) if r[0] == "deliver"]
    assert delivered == [("t-1", 2), ("t-2", 4)]


def test_the_worker_is_the_process_that_ran_the_task_not_celery_hostname(rows_of) -> None:
    # celery.hostname is the sender's name: taking it for the worker would make one
    # "worker" of every run a producer sent.
    worker = Process(Resource({"service.name": "billing-worker",
                               "service.instance.id": "pool-child-3"}))
    run(worker, "t-1")
    assert rows_of(worker.spans())[0][4] == "pool-child-3"


def test_a_worker_id_on_the_span_wins_over_the_hostname(rows_of) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", **{"job.worker_id": "pod-7"})
    assert rows_of(worker.spans())[0][4] == "pod-7"


def test_a_run_with_its_own_deliver_event_is_delivered_once(rows_of) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", events=(("deliver", 0.5), ("side_effect", 1), ("ack", 1.5)))
    assert [r[0] for r in rows_of(worker.spans())] == ["deliver", "side_effect", "ack"]
    assert _reference(worker.spans())[0].num_rows == 3


def test_an_execution_span_with_a_deliver_event_keeps_its_end(rows_of) -> None:
    worker = Process(WORKER)
    worker.span("process invoice", SpanKind.CONSUMER,
                {"messaging.message.id": "m-1", "job.job_type": "invoice"}, 0,
                (("deliver", 0.25), ("ack", 1)))
    decoded = decode_traces(encode_spans(worker.spans()), Normaliser(), "src").rows
    assert [(r["event"], r["ts"]) for r in decoded] == [
        ("deliver", T0 // 1000 + 250_000), ("ack", T0 // 1000 + 1_000_000)]
    assert f'"span.end_us":{T0 // 1000 + 2_000_000}' in decoded[0]["attrs"]
    assert [r[0] for r in rows_of(worker.spans())] == ["deliver", "ack"]


def test_a_producer_span_naming_a_job_is_an_enqueue_whatever_else_it_says(rows_of) -> None:
    producer = Process(PRODUCER)
    producer.span("orders publish", SpanKind.PRODUCER, {
        "messaging.message.id": "m-1", "job.job_type": "invoice", "delivery_attempt": 1,
        "messaging.operation.type": "process"})
    assert rows_of(producer.spans()) == [("enqueue", "m-1", "invoice", 1, None, None)]


def test_a_producer_span_naming_no_job_is_not_a_job_event() -> None:
    producer = Process(PRODUCER)
    producer.span("kafka send", SpanKind.PRODUCER, {"messaging.system": "kafka"})
    decoded = decode_traces(encode_spans(producer.spans()), Normaliser(), "src")
    assert (decoded.rows, decoded.rejected, decoded.ignored) == ([], [], 1)


def test_an_enqueue_takes_no_worker_from_the_resource_but_keeps_its_own(rows_of) -> None:
    producer = Process(PRODUCER)
    producer.span("enqueue", SpanKind.INTERNAL, {"job.job_id": "j-1", "job.job_type": "x"})
    producer.span("enqueue", SpanKind.INTERNAL,
                  {"job.job_id": "j-2", "job.job_type": "x", "job.worker_id": "cron-1"}, 1)
    assert [(r[1], r[4]) for r in rows_of(producer.spans())] == [("j-1", None), ("j-2", "cron-1")]


def test_the_native_decoder_keeps_enqueues_and_producer_spans_on_its_fast_path() -> None:
    require_native("_otlp_native")
    # Every messaging instrumentation writes a PRODUCER span per publish.
    producer = Process(PRODUCER)
    producer.span("enqueue", SpanKind.INTERNAL, {"job.job_id": "j-1", "job.job_type": "x"})
    producer.span("orders publish", SpanKind.PRODUCER, {"messaging.message.id": "m-1"}, 1)
    body = encode_spans(producer.spans()).SerializeToString()
    count, _, fallback, _, _ = NativeTraceDecoder(Normaliser()).native.decode(body, "src")
    assert (count, fallback) == (2, [])


def test_a_retries_value_that_is_no_number_rejects_that_span_alone() -> None:
    worker = Process(WORKER)
    run(worker, "t-1", retries="many")
    run(worker, "t-2")
    decoded = decode_traces(encode_spans(worker.spans()), Normaliser(), "src")
    assert [r["job_id"] for r in decoded.rows] == ["t-2", "t-2"]
    assert "celery.retries must be an integer, got 'many'" in decoded.rejected[0].reason


def _celery_mix(seed: int) -> list:
    """Celery spans of both processes among ordinary job spans, with odd values."""
    rng = random.Random(seed)
    producer, worker = Process(PRODUCER), Process(WORKER)
    for i in range(40):
        task_id, at = f"t-{i % 25}", i * 0.1
        shape = rng.randrange(6)
        if shape == 0:
            publish(producer, task_id, at)
        elif shape == 1:
            run(worker, task_id, at, retries=rng.choice([None, 1, "2", 3.0]),
                redelivered=rng.random() < 0.3,
                state=rng.choice(["SUCCESS", "RETRY", "FAILURE", "?"]),
                events=rng.choice([(), (("deliver", 0.01),), (("side_effect", 0.01),)]))
        elif shape == 2:
            producer.span("enqueue", rng.choice([SpanKind.INTERNAL, SpanKind.PRODUCER]),
                          {"job.job_id": task_id, "job.job_type": "x",
                           **rng.choice([{}, {"worker_id": "w"}])}, at)
        elif shape == 3:
            worker.span("process", SpanKind.CONSUMER,
                        {"messaging.message.id": task_id, "job.delivery_attempt": 1}, at,
                        rng.choice([(), (("deliver", 0.01), ("ack", 0.02)), (("ack", 0.02),)]))
        elif shape == 4:
            producer.span(rng.choice(["send", "deliver", "x"]), SpanKind.PRODUCER,
                          rng.choice([{"messaging.message.id": task_id,
                                       "messaging.operation": "send"},
                                      {"job.job_id": task_id, "job.event": "deliver"},
                                      {"job.event": "deliver"}, {}]), at,
                          rng.choice([(), (("ack", 0.01),)]))
        else:
            worker.span(f"apply_async/{TASK}", SpanKind.PRODUCER,
                        {"messaging.message.id": task_id, "celery.hostname": "celery@w1"}, at)
    return producer.spans() + worker.spans()


@pytest.mark.parametrize("seed", range(4))
def test_every_decoder_path_gives_the_reference_table(seed: int) -> None:
    spans = _celery_mix(seed)
    reference, refused = _reference(spans)
    reference = reference.sort_by("event_uid")
    for name, decode in PATHS.items():
        table, rejected = decode(spans)
        assert table.sort_by("event_uid").equals(reference), name
        if name != "otlp-json":  # it answers with a summary of them
            assert sorted(rejected) == sorted(refused), name
    assert reference.num_rows > 30 and refused


def _duplicates(store, spans: list) -> list[tuple]:
    table, rejected = _reference(spans)
    assert not rejected, rejected
    store.write(table)
    found = duplicates(store)
    return list(zip(found["key"], found["cause"], found["executions"], strict=True))


def test_clean_tasks_are_no_duplicates(embedded) -> None:
    producer, worker = Process(PRODUCER), Process(WORKER)
    for i in range(5):
        publish(producer, f"t-{i}", i)
        run(worker, f"t-{i}", i + 0.5)
    assert _duplicates(embedded, producer.spans() + worker.spans()) == []


def test_a_celery_retry_is_a_retry_after_failure(embedded) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", 1, state="RETRY")
    run(worker, "t-1", 4, retries="1")
    assert _duplicates(embedded, worker.spans()) == [("t-1", "retry_after_failure", 2)]


def test_a_redelivery_after_a_successful_run_is_a_broker_redelivery(embedded) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", 1)
    run(worker, "t-1", 4, redelivered=True)
    assert _duplicates(embedded, worker.spans()) == [("t-1", "broker_redelivery", 2)]


def test_a_redelivery_while_the_first_run_runs_is_a_visibility_timeout(embedded) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", 1)  # runs for 2 s
    run(worker, "t-1", 2, redelivered=True)
    assert _duplicates(embedded, worker.spans()) == [("t-1", "visibility_timeout", 2)]


def test_a_redelivery_whose_first_run_left_no_span_is_a_worker_crash(embedded) -> None:
    worker = Process(WORKER)
    run(worker, "t-1", 4, redelivered=True)
    assert _duplicates(embedded, worker.spans()) == [("t-1", "worker_crash", 2)]


def test_one_key_published_as_two_tasks_is_a_producer_retry(embedded) -> None:
    producer, worker = Process(PRODUCER), Process(WORKER)
    for task_id in ("t-1", "t-2"):
        producer.span(f"apply_async/{TASK}", SpanKind.PRODUCER, {
            "celery.action": "apply_async", "messaging.message.id": task_id,
            "celery.task_name": TASK, "job.idempotency_key": "order-7"})
        run(worker, task_id)
    assert _duplicates(embedded, producer.spans() + worker.spans()) == [
        ("order-7", "producer_retry", 2)]
