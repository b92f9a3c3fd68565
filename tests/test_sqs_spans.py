"""SQS consumers traced by opentelemetry-instrumentation-boto3sqs, with no code change:
its spans, made here by the real instrumentation around real boto3 calls on an in-process
moto, map to the contract by `messaging.message_id`: `<queue> send` is the enqueue,
`<queue> process` (from the receive to the delete) one execution, and the `<queue>
receive` span of each poll no event at all."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors.decoders import REGISTRY
from collectors.normalise import Normaliser
from queries import duplicates
from store.embedded import EmbeddedStore
from store.schema import as_events

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")
boto3sqs = pytest.importorskip("opentelemetry.instrumentation.boto3sqs")
botocore_instrumentation = pytest.importorskip("opentelemetry.instrumentation.botocore")
_QUEUES = itertools.count()


@pytest.fixture(scope="module")
def sqs() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """An instrumented boto3 SQS client on moto, and the spans it makes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # Both, as `opentelemetry-instrument` loads every instrumentation installed.
    instrumentors = [boto3sqs.Boto3SQSInstrumentor(),
                     botocore_instrumentation.BotocoreInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    with moto.mock_aws():
        client = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="lab",
                              aws_secret_access_key="lab")
        yield client, exporter
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


def _spans(sqs: tuple[Any, InMemorySpanExporter], receives: int, record: bool) -> bytes:
    """A message sent, received `receives` times (its visibility timeout is 0, so a
    receive while the first run goes on gets it again) and deleted; with `record`, each
    receive's count is recorded on its span, as docs/queues-sidekiq-sqs.md shows."""
    client, exporter = sqs
    exporter.clear()
    url = client.create_queue(QueueName=f"charges-{next(_QUEUES)}",
                              Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    client.send_message(QueueUrl=url, MessageBody=json.dumps({"order": 7}))
    handles = []
    for _ in range(receives):
        response = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=1,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        for message in response["Messages"]:  # the instrumentation's list: its span current
            if record:
                count = int(message["Attributes"]["ApproximateReceiveCount"])
                trace.get_current_span().set_attribute("aws.sqs.approximate_receive_count", count)
            handles.append(message["ReceiptHandle"])
    for handle in handles:
        client.delete_message(QueueUrl=url, ReceiptHandle=handle)
    client.receive_message(QueueUrl=url, WaitTimeSeconds=0)  # a poll that finds nothing
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def _rows(body: bytes) -> list[dict]:
    output = REGISTRY.reference("traces", "protobuf").decode(body, Normaliser(), "test")
    assert output.rejected == []
    return as_events(output.table).to_pylist()


def test_send_is_the_enqueue_and_process_the_delivery_of_one_message_id(sqs) -> None:
    rows = _rows(_spans(sqs, 1, record=False))
    assert [r["event"] for r in rows] == ["enqueue", "deliver"]
    assert rows[0]["job_id"] == rows[1]["job_id"] and rows[1]["queue"].startswith("charges-")
    attrs = json.loads(rows[1]["attrs"])
    assert attrs["span.name"].endswith(" process") and attrs["span.end_us"] > 0


def test_receive_spans_and_botocores_spans_are_no_event_and_no_rejection(sqs) -> None:
    body = _spans(sqs, 1, record=False)
    names = {span.name for span in sqs[1].get_finished_spans()}
    assert {"SQS.ReceiveMessage", "SQS.SendMessage", "SQS.DeleteMessage"} <= names
    reference = REGISTRY.reference("traces", "protobuf")
    outputs = [reference.decode(body, Normaliser(), "test")] + [
        accelerator.decode(body, Normaliser(), "test")
        for accelerator in REGISTRY.accelerators("traces", "protobuf")
        if accelerator.available()
    ]
    for output in outputs:  # every decoder of the source says the same
        assert output.rejected == [] and len(output.table) == 2
        # Both receive spans, and botocore's: create, send, two receives, delete.
        assert output.ignored == outputs[0].ignored >= 7


def test_a_recorded_receive_count_is_the_delivery_attempt(sqs) -> None:
    deliveries = [r for r in _rows(_spans(sqs, 2, record=True)) if r["event"] == "deliver"]
    assert [r["delivery_attempt"] for r in deliveries] == [1, 2]


def test_a_message_received_again_while_its_first_run_goes_on_is_a_visibility_timeout(
    sqs, tmp_path: Path
) -> None:
    output = REGISTRY.reference("traces", "protobuf").decode(
        _spans(sqs, 2, record=True), Normaliser(), "test"
    )
    store = EmbeddedStore(tmp_path / "store")
    store.write(as_events(output.table))
    found = duplicates(store)
    assert list(found["cause"]) == ["visibility_timeout"]
