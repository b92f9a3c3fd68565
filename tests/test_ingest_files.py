"""`dupescope ingest`: JSON-lines and OTLP JSON Lines files, gzip, bad lines, the CLI."""

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collectors import files
from collectors.decoders import Output, Registry
from collectors.decoders.json_lines import LinesReference
from collectors.files import ingest_files
from collectors.normalise import Normaliser
from dupescope.cli import main
from queries import timeline

T0 = 1_764_504_000_000_000_000  # ns, 2025-11-30T12:00:00Z
LINES = [
    {
        "ts": "2025-11-30T12:00:00Z",
        "event": "deliver",
        "job_id": "j1",
        "job_type": "mail.send",
        "idempotency_key": "mail-1",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
    {
        "ts": "2025-11-30T12:00:01Z",
        "event": "side_effect",
        "job_id": "j1",
        "job_type": "mail.send",
        "idempotency_key": "mail-1",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
    {
        "ts": "2025-11-30T12:00:02Z",
        "event": "ack",
        "job_id": "j1",
        "job_type": "mail.send",
        "idempotency_key": "mail-1",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
]
JOB = {
    "job.job_id": "j1",
    "job.job_type": "mail.send",
    "job.idempotency_key": "mail-1",
    "job.delivery_attempt": 1,
}


def write_jsonl(path: Path, records: list[dict], extra: list[bytes] = ()) -> Path:
    path.write_bytes(b"\n".join([orjson.dumps(r) for r in records] + list(extra)) + b"\n")
    return path


def otlp_lines(shape: str) -> list[bytes]:
    """The same execution through the real OpenTelemetry SDK, as span events or child spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"host.name": "w1", "process.pid": 0}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("worker")
    attrs = {**JOB, "worker_id": "w1"}
    span = tracer.start_span("mail.send process", attributes=attrs, start_time=T0)
    if shape == "events":
        span.add_event("side_effect", attrs, timestamp=T0 + 1_000_000_000)
        span.add_event("ack", attrs, timestamp=T0 + 2_000_000_000)
    else:
        from opentelemetry import trace

        context = trace.set_span_in_context(span)
        for offset, step in ((1, "side_effect"), (2, "ack")):
            child = tracer.start_span(
                step, context=context, attributes=attrs, start_time=T0 + offset * 1_000_000_000
            )
            child.end(end_time=T0 + offset * 1_000_000_000 + 1000)
    span.end(end_time=T0 + 2_000_000_000)
    request = encode_spans(exporter.get_finished_spans())
    return [json_format.MessageToJson(request, indent=None).encode()]


def essentials(frame) -> list[tuple]:
    return list(
        zip(
            frame["ts"].astype(str),
            frame["event"],
            frame["job_id"],
            frame["delivery_attempt"],
            frame["worker_id"],
            frame["execution"],
            strict=True,
        )
    )


def test_jsonl_and_gzip_give_the_same_rows(tmp_path, embedded) -> None:
    plain = write_jsonl(tmp_path / "a.jsonl", LINES)
    zipped = tmp_path / "b.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    report = ingest_files([str(plain), str(zipped)], embedded)
    assert report.rows == 6 and not report.rejected
    assert len(timeline(embedded, "mail-1")) == 3


@pytest.mark.parametrize("shape", ["events", "child_spans"])
def test_otlp_json_lines_give_the_rows_of_the_same_logs(tmp_path, store, shape) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join(otlp_lines(shape)) + b"\n")
    report = ingest_files([str(path)], store)
    assert not report.rejected
    from_spans = timeline(store, "mail-1")
    assert essentials(from_spans) == [
        (t, e, "j1", 1, "w1", 1)
        for t, e in zip(
            ["2025-11-30 12:00:00+00:00", "2025-11-30 12:00:01+00:00", "2025-11-30 12:00:02+00:00"],
            ["deliver", "side_effect", "ack"],
            strict=True,
        )
    ]


def test_hex_ids_of_the_otlp_file_format_are_read(tmp_path, embedded) -> None:
    document = orjson.loads(otlp_lines("events")[0])
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    import base64

    trace_hex = base64.b64decode(span["traceId"]).hex()
    span["traceId"], span["spanId"] = trace_hex, base64.b64decode(span["spanId"]).hex()
    path = tmp_path / "hex.jsonl"
    path.write_bytes(orjson.dumps(document) + b"\n")
    ingest_files([str(path)], embedded)
    assert set(timeline(embedded, "mail-1")["trace_id"]) == {trace_hex}


def test_bad_lines_are_reported_and_the_rest_kept(tmp_path, embedded) -> None:
    path = write_jsonl(
        tmp_path / "w.jsonl", LINES, [b'{"ts": 1, "event": "nope", "job_id": "x"}', b"{not json"]
    )
    report = ingest_files([str(path)], embedded)
    assert report.rows == 3
    assert [r.where for r in report.rejected] == [f"{path}:4", f"{path}:5"]
    assert report.rejected[0].reason == "unknown event 'nope'"
    assert report.rejected[1].reason.startswith("invalid JSON")


def test_cli_ingest_reports_bad_lines_and_exit_codes(tmp_path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", LINES, [b"{broken"])
    store = str(tmp_path / "store")
    result = CliRunner().invoke(main, ["ingest", "--store", store, str(path)])
    assert result.exit_code == 0
    assert f"{path}:4: invalid JSON" in result.output
    assert "3 events stored from 1 file(s), 4 lines; 1 rejected" in result.output
    strict = CliRunner().invoke(main, ["ingest", "--strict", "--store", store, str(path)])
    assert strict.exit_code == 2


def test_cli_ingest_of_a_file_stored_before_says_none_of_its_events_were_new(tmp_path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", LINES)
    store = str(tmp_path / "store")
    first = CliRunner().invoke(main, ["ingest", "--store", store, str(path)])
    assert "3 new, 0 already stored" in first.output
    again = CliRunner().invoke(main, ["ingest", "--store", store, str(path)])
    assert again.exit_code == 0
    assert "0 new, 3 already stored" in again.output


def test_an_ingest_counts_as_new_only_the_lines_the_store_did_not_hold(
    tmp_path, store
) -> None:
    first = write_jsonl(tmp_path / "first.jsonl", LINES[:2])
    both = write_jsonl(tmp_path / "both.jsonl", LINES)
    assert ingest_files([str(first)], store).already_stored == 0
    report = ingest_files([str(both)], store)
    assert (report.rows, report.already_stored) == (3, 2)


def test_cli_ingest_fails_when_nothing_could_be_read(tmp_path) -> None:
    path = tmp_path / "garbage.log"
    path.write_text("hello\nworld\n")
    result = CliRunner().invoke(main, ["ingest", "--store", str(tmp_path / "s"), str(path)])
    assert result.exit_code == 1
    assert "0 events stored" in result.output


def test_cli_ingest_reads_stdin(tmp_path) -> None:
    data = b"\n".join(orjson.dumps(r) for r in LINES)
    store = str(tmp_path / "store")
    result = CliRunner().invoke(main, ["ingest", "--store", store, "-"], input=data)
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["timeline", "mail-1", "--store", store, "--format", "json"])
    rows = orjson.loads(shown.stdout)
    assert [r["event"] for r in rows] == ["deliver", "side_effect", "ack"]
    assert rows[0]["ts"] == "2025-11-30T12:00:00.000000Z"


def test_cli_timeline_of_an_unknown_key_says_so(tmp_path) -> None:
    (tmp_path / "s").mkdir()
    result = CliRunner().invoke(main, ["timeline", "ghost", "--store", str(tmp_path / "s")])
    assert result.exit_code == 0
    assert "no events for 'ghost'" in result.output


def test_cli_rejects_an_unknown_store_scheme(tmp_path) -> None:
    result = CliRunner().invoke(main, ["timeline", "k", "--store", "mysql://x"])
    assert result.exit_code == 1
    assert "unknown store" in result.output


def _one_span_request(resource: dict, span_attrs: dict):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("w").start_span("run", attributes=span_attrs, start_time=T0)
    span.add_event("ack", {}, timestamp=T0 + 1)
    span.end(end_time=T0 + 2)
    return encode_spans(exporter.get_finished_spans())


def test_a_worker_id_on_the_span_wins_over_the_resources_host_and_pid() -> None:
    from collectors.normalise import Normaliser
    from collectors.otlp import decode_traces

    request = _one_span_request(
        {"host.name": "h", "process.pid": 1}, {**JOB, "job.worker_id": "w9"}
    )
    rows = decode_traces(request, Normaliser(), "t").rows
    assert {r["worker_id"] for r in rows} == {"w9"}


def test_host_and_pid_name_the_worker_when_the_span_does_not() -> None:
    from collectors.normalise import Normaliser
    from collectors.otlp import decode_traces

    request = _one_span_request(
        {"host.name": "h", "process.pid": 1, "service.instance.id": "uuid-1"}, JOB
    )
    rows = decode_traces(request, Normaliser(), "t").rows
    assert {r["worker_id"] for r in rows} == {"h:1"}


def test_ingest_reads_lines_with_the_registrys_bulk_decoder() -> None:
    assert files.lines_decoder().name == "blocks.BlockDecoder"
    assert files.lines_decoder(views=True).views


@dataclass(frozen=True)
class NotedReference(LinesReference):
    """The line-by-line reference, noting each body it decodes."""

    bodies: list[str] = field(default_factory=list)

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        self.bodies.append(source)
        return super().decode(body, normaliser, source)


def test_without_a_bulk_decoder_ingest_reads_lines_with_the_reference(
    tmp_path, embedded, monkeypatch
) -> None:
    reference, only_reference = NotedReference(), Registry()
    only_reference.register(reference)
    monkeypatch.setattr(files, "REGISTRY", only_reference)
    path = write_jsonl(tmp_path / "a.jsonl", LINES[:2], [b"{not json"])
    report = ingest_files([str(path)], embedded)
    assert reference.bodies == [str(path)]
    assert (report.rows, report.lines) == (2, 3)
    assert [r.where for r in report.rejected] == [f"{path}:3"]
