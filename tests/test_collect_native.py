"""The native OTLP decoder gives exactly the reference rows, and hands back what it can't."""

from __future__ import annotations

import pyarrow as pa
import pytest
from collect_support import source_digest
from native_support import require_native
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from support.otlp_spans import MAPPING, T, job_span, mixed_request, str_attr
from support.trace_decoders import native_and_reference

from collectors import otlp_native
from collectors.arrow_batch import rows_to_table
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from collectors.otlp_native import NativeTraceDecoder
from collectors.service.bodies import BodyError, decode_otlp
from sample_data.otlp_requests import trace_request
from store import contract
from store.schema import EVENTS_SCHEMA, as_events, is_runs


@pytest.fixture(autouse=True)
def _native_built() -> None:
    """Each test here is of the extension: skipped without a C compiler to build it."""
    require_native("_otlp_native")


def test_the_native_decoder_is_built_here() -> None:
    # The install compiles it wherever a C compiler is present, as on every machine we test.
    assert otlp_native.available()
    assert NativeTraceDecoder(Normaliser()).native is not None


def test_the_native_decoder_is_built_from_the_source_beside_it() -> None:
    # A failed build is silent (the extension is optional) and leaves the last one in place.
    built = require_native("_otlp_native")
    assert built.SOURCE_DIGEST == source_digest(built, "_otlp_native.c")


@pytest.mark.parametrize("seed", range(6))
def test_native_decoder_equals_decode_traces_on_every_span_shape(seed: int) -> None:
    native, reference = native_and_reference(mixed_request(seed))
    assert native[0].equals(reference[0])
    assert native[1:] == reference[1:]
    assert native[0].num_rows and native[1] and native[2]  # rows, rejections, ignored spans


def test_native_decoder_equals_decode_traces_on_the_benchmark_payload() -> None:
    request = trace_request(5, 300)
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0].num_rows == 300 * 4


def test_native_decoder_reads_the_benchmark_payload_without_the_python_path() -> None:
    decoder = NativeTraceDecoder(Normaliser())
    body = trace_request(1, 50).SerializeToString()
    rows, _, fallback, ignored, runs = decoder.native.decode(body, "src")
    assert (rows, fallback, ignored, runs) == (200, [], 0, True)


def test_spans_with_steps_come_out_as_runs_of_their_shared_columns() -> None:
    request = trace_request(1, 50)
    table, _, _ = NativeTraceDecoder(Normaliser()).decode(
        request.SerializeToString(), lambda: request, "src"
    )
    assert is_runs(table)
    assert len(table["trace_id"].chunk(0).values) == 50  # one value a span, not a row


def test_spans_handed_back_half_written_leave_the_runs_around_them_intact() -> None:
    # Neighbouring spans share values (an idempotency key, a job type), so runs cross from
    # one span into the next; a span undone after its first rows must shorten them again.
    request = trace_request(7, 120)
    spans = request.resource_spans[0].scope_spans[0].spans
    late, early = range(0, 120, 5), range(3, 120, 7)
    for spans_at, step in ((late, 2), (early, 1)):  # a double: the reference renders it
        for i in spans_at:
            spans[i].events[step].attributes.append(
                KeyValue(key="ratio", value=AnyValue(double_value=0.5)))
    _, _, fallback, _, runs = NativeTraceDecoder(Normaliser()).native.decode(
        request.SerializeToString(), "src")
    assert runs
    assert {span for _, _, span in fallback} == {*late, *early}
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0].num_rows == 120 * 4


def test_spans_without_steps_come_out_plain() -> None:
    request = trace_request(1, 50, steps=0)
    table, _, _ = NativeTraceDecoder(Normaliser()).decode(
        request.SerializeToString(), lambda: request, "src"
    )
    assert table.schema == EVENTS_SCHEMA


def _span_request(*attributes: KeyValue) -> ExportTraceServiceRequest:
    request = trace_request(2, 3, steps=0)
    request.resource_spans[0].scope_spans[0].spans[1].attributes.extend(attributes)
    return request


@pytest.mark.parametrize(
    "value",
    [AnyValue(double_value=0.25), AnyValue(bytes_value=b"\x00\x01"),
     AnyValue(string_value="tab\there \"quoted\" \x01 and é")],
    ids=["float", "bytes", "escapes"],
)
def test_values_it_does_not_render_itself_still_give_the_reference_row(value: AnyValue) -> None:
    native, reference = native_and_reference(_span_request(KeyValue(key="extra", value=value)))
    assert native[0].equals(reference[0])
    assert native[0].num_rows == 3


def test_a_span_the_native_decoder_hands_back_is_named_by_its_indices() -> None:
    request = _span_request(KeyValue(key="ratio", value=AnyValue(double_value=0.5)))
    decoder = NativeTraceDecoder(Normaliser())
    rows, _, fallback, _, _ = decoder.native.decode(request.SerializeToString(), "src")
    assert fallback == [(0, 0, 1)]
    assert rows == 2


def test_a_rejected_span_is_reported_where_the_reference_reports_it() -> None:
    request = _span_request(KeyValue(key="delivery_attempt", value=AnyValue(int_value=0)))
    native, reference = native_and_reference(request)
    assert native[1] == reference[1]
    assert "delivery_attempt must be >= 1" in native[1][0][1]
    assert native[0].equals(reference[0])


def test_a_user_mapping_gives_the_reference_rows() -> None:
    mapping = FieldMapping(fields={"idempotency_key": ("order.key",), "job_id": ("task.uuid",)})
    request = _span_request(
        KeyValue(key="order.key", value=AnyValue(string_value="order-9")),
        KeyValue(key="task.uuid", value=AnyValue(string_value="t-1")),
    )
    native, reference = native_and_reference(request, mapping)
    assert native[0].equals(reference[0])
    assert "order-9" in native[0].column("idempotency_key").to_pylist()


def test_event_renames_leave_the_mapping_to_the_python_path() -> None:
    assert NativeTraceDecoder(Normaliser(MAPPING)).native is None


def test_a_body_it_cannot_walk_goes_whole_to_the_python_path() -> None:
    decoder = NativeTraceDecoder(Normaliser())
    body = trace_request(1, 5).SerializeToString()
    assert decoder.native.decode(body[:-7], "src") is None  # truncated inside a span


def test_mixed_requests_under_a_mapping_equal_the_reference() -> None:
    mapping = FieldMapping(fields={"resource_key": ("tenant",)})
    native, reference = native_and_reference(mixed_request(9), mapping)
    assert native[0].equals(reference[0])
    assert native[1:] == reference[1:]


def _decode(body: bytes) -> int:
    return decode_otlp("traces", body, "protobuf", Normaliser(), "src").table.num_rows


@pytest.mark.parametrize("text", [b"dupescope.bench", b"process invoice", b"billing-worker"],
                         ids=["scope name", "span name", "attribute value"])
def test_a_string_that_is_not_utf8_gets_the_reference_answer(text: bytes) -> None:
    body = trace_request(1, 5).SerializeToString()
    assert text in body and _decode(body) == 20
    broken = body.replace(text, b"\xff" * len(text))
    with pytest.raises(BodyError, match="undecodable protobuf") as refused:
        _decode(broken)
    assert refused.value.status == 400


def test_a_span_for_the_python_path_is_decoded_from_the_parsed_body() -> None:
    body = _span_request(KeyValue(key="ratio", value=AnyValue(double_value=0.5)))
    assert _decode(body.SerializeToString()) == 3


def test_one_decoder_gives_the_same_rows_whatever_size_of_request_came_before() -> None:
    # Each request reserves its buffers from the sizes the previous one reached.
    shared = NativeTraceDecoder(Normaliser())
    requests = [trace_request(1, 5), trace_request(2, 400), trace_request(3, 5),
                trace_request(4, 1), trace_request(5, 400)]
    for request in requests:
        body = request.SerializeToString()
        table = shared.decode(body, lambda r=request: r, "src")[0]
        fresh = NativeTraceDecoder(Normaliser()).decode(body, lambda r=request: r, "src")[0]
        assert table.equals(fresh)
        assert table.num_rows == len(request.resource_spans[0].scope_spans[0].spans) * 4


def test_step_events_without_attributes_give_the_reference_rows_natively() -> None:
    steps = [("side_effect", T), ("log", T + 1), ("commit", T + 2), ("ack", T + 3),
             ("lock_release", T + 4)]
    request = job_span("process", steps, str_attr("messaging.message.id", "m-1"),
                        str_attr("job.job_type", "charge"), str_attr("retry_reason", "none"))
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0]["event"].to_pylist().count("ack") == 1
    _, _, fallback, _, _ = NativeTraceDecoder(Normaliser()).native.decode(
        request.SerializeToString(), "src")
    assert fallback == []


@pytest.mark.parametrize("steps", [1, 3, 4, 5, 9])
def test_the_uids_of_a_span_with_any_number_of_steps_are_the_reference_uids(steps: int) -> None:
    # A span's uids are hashed four at a time: full groups, and groups with lanes to spare.
    events = [(name, T + i) for i, name in enumerate(["side_effect", "commit", "ack"] * 3)]
    request = job_span("process", events[:steps], str_attr("messaging.message.id", "m-1"))
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])  # each row with its own uid
    assert native[0].num_rows == steps + 1


def test_uids_longer_than_one_hash_block_are_the_reference_uids() -> None:
    request = job_span("process", [("ack", T)], str_attr("messaging.message.id", "m-1"))
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x07" * 64
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0].num_rows == 2


def test_a_later_step_that_needs_the_job_id_a_span_lacks_gets_the_reference_answer() -> None:
    request = job_span("worker_start", [("worker_stop", T), ("ack", T + 1)])
    native, reference = native_and_reference(request)
    assert reference[1], "the reference refuses the ack without a job id"
    assert native[0].equals(reference[0])
    assert native[1:] == reference[1:]


@pytest.mark.parametrize("time_ns", [1, T // 1000, 2**64 - 1])
def test_a_step_time_is_nanoseconds_whatever_its_size_as_the_reference_reads_it(
    time_ns: int,
) -> None:
    request = job_span("process", [("side_effect", T), ("ack", time_ns)],
                        str_attr("messaging.message.id", "m-1"))
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    ack = native[0].filter(pa.compute.equal(native[0]["event"], "ack"))
    assert ack["ts"].cast(pa.int64()).to_pylist() == [time_ns // 1000]
    _, _, fallback, _, _ = NativeTraceDecoder(Normaliser()).native.decode(
        request.SerializeToString(), "src")
    assert fallback == []  # read natively, not handed back


def test_a_character_json_escapes_is_rendered_as_the_reference_does_at_any_position() -> None:
    request = trace_request(3, 3 * 20, steps=0)
    spans = request.resource_spans[0].scope_spans[0].spans
    for i, special in enumerate(["\"", "\\", "\x1f"] * 20):
        at = i // 3
        text = "x" * at + special + "é" * (i % 2) + "y" * (20 - at)
        spans[i].attributes.append(KeyValue(key="note", value=AnyValue(string_value=text)))
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0].num_rows == 60


# Found by fuzzing (fuzz/otlp_target.py): protobuf's parser reads tags and lengths as
# 32-bit varints of at most five bytes, and refuses a body with a longer one.
@pytest.mark.parametrize("field", [
    bytes([0xf8, 0xff, 0xff, 0xff, 0x1f, 0x01]),  # a tag of more than 32 bits
    bytes([0xc8, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01]),  # field 9's tag in six bytes
    bytes([0x4a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0x41]),  # a length in six bytes
], ids=["tag over 32 bits", "tag of six bytes", "length of six bytes"])
def test_a_varint_protobuf_refuses_refuses_the_body(field: bytes) -> None:
    body = trace_request(1, 5).SerializeToString() + field
    assert NativeTraceDecoder(Normaliser()).native.decode(body, "src") is None
    with pytest.raises(BodyError, match="undecodable protobuf"):
        _decode(body)


def test_a_tag_padded_to_five_bytes_is_read_as_protobuf_reads_it() -> None:
    body = trace_request(1, 5).SerializeToString() + bytes([0xc8, 0x80, 0x80, 0x80, 0x00, 1])
    rows, _, fallback, _, _ = NativeTraceDecoder(Normaliser()).native.decode(body, "src")
    assert (rows, fallback) == (20, [])
    assert _decode(body) == 20


def test_an_empty_host_name_gives_the_reference_worker_id() -> None:
    # Found by fuzzing: its host:pid was built from an empty buffer, NULL + 0 in C.
    request = trace_request(1, 2)
    resource = request.resource_spans[0].resource
    for kv in resource.attributes:
        if kv.key == "host.name":
            kv.value.string_value = ""
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert set(native[0]["worker_id"].to_pylist()) == {":4001"}


def _nested(text: str) -> KeyValue:
    kv = KeyValue(key="tags")
    kv.value.array_value.values.add().kvlist_value.values.append(
        KeyValue(key="k", value=AnyValue(string_value=text)))
    return kv


def _on_an_event_that_is_no_step(request: ExportTraceServiceRequest) -> None:
    request.resource_spans[0].scope_spans[0].spans[0].events[2].attributes.append(
        _nested("MARKER"))  # the span's third event is a `log`


def _on_a_resource_without_spans(request: ExportTraceServiceRequest) -> None:
    request.resource_spans.add().resource.attributes.append(_nested("MARKER"))


def _in_an_entity_ref(request: ExportTraceServiceRequest) -> None:
    request.resource_spans[0].resource.entity_refs.add(type="MARKER")


@pytest.mark.parametrize("place", [_on_an_event_that_is_no_step, _on_a_resource_without_spans,
                                   _in_an_entity_ref], ids=lambda place: place.__name__[1:])
def test_a_string_that_is_not_utf8_where_no_row_reads_it_still_refuses_the_body(place) -> None:
    request = trace_request(1, 5, steps=2)
    place(request)
    body = request.SerializeToString()
    assert _decode(body) == 15
    with pytest.raises(BodyError, match="undecodable protobuf"):
        _decode(body.replace(b"MARKER", b"\xff" * 6))


def test_a_value_given_as_a_string_table_index_gets_the_reference_row() -> None:
    request = _span_request(KeyValue(key="note", value=AnyValue(string_value_strindex=7)),
                            KeyValue(key="queue", value=AnyValue(string_value_strindex=3)))
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert "3" in native[0]["queue"].to_pylist()


def test_a_producer_span_of_a_resource_without_attributes_gets_the_reference_row() -> None:
    # Found by fuzzing: the resource attributes it looked through were an empty array
    # with no memory (NULL + 0 in C).
    request = job_span("orders publish", [], str_attr("messaging.message.id", "m-1"))
    request.resource_spans[0].scope_spans[0].spans[0].kind = 4  # PRODUCER
    native, reference = native_and_reference(request)
    assert native[0].equals(reference[0])
    assert native[0]["event"].to_pylist() == ["enqueue"]
    _, _, fallback, _, _ = NativeTraceDecoder(Normaliser()).native.decode(
        request.SerializeToString(), "src")
    assert fallback == []


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])


def test_a_span_kind_past_32_bits_is_the_kind_protobuf_reads() -> None:
    # protobuf keeps an enum's low 32 bits: 4 + 2**32 is PRODUCER, so the span an enqueue.
    request = job_span("orders publish", [], str_attr("messaging.message.id", "m-1"))
    span = request.resource_spans[0].scope_spans[0].spans[0].SerializeToString()
    span += b"\x30" + _varint(4 + 2**32)  # kind again, the last one read wins
    scope = b"\x12" + _varint(len(span)) + span
    resource = b"\x12" + _varint(len(scope)) + scope
    body = b"\x0a" + _varint(len(resource)) + resource
    parsed = ExportTraceServiceRequest.FromString(body)
    assert parsed.resource_spans[0].scope_spans[0].spans[0].kind == 4
    table, _, ignored = NativeTraceDecoder(Normaliser()).decode(body, lambda: parsed, "src")
    assert (table["event"].to_pylist(), ignored) == (["enqueue"], 0)
    assert as_events(table).equals(rows_to_table(decode_traces(parsed, Normaliser(), "src").rows))


def test_the_native_decoder_writes_the_fields_of_the_layout_it_is_handed() -> None:
    # A string field the contract lacks: the extension's columns come from the layout.
    config = otlp_native.native_config(Normaliser())
    extra = len(config["fields"])
    config["fields"] += ("example_field",)
    config["types"] += ("string",)
    config["aliases"] = {**config["aliases"], "example_field": extra * 256}
    decoder = otlp_native._otlp_native.Decoder(**config)
    request = job_span("deliver", [], str_attr("job_id", "j-1"), str_attr("example_field", "x"))
    rows, columns, fallback, _, runs = decoder.decode(request.SerializeToString(), "src")
    names = ("event_uid", "ts", "event", *contract.STRING_FIELDS, "example_field",
             *contract.INT_FIELDS, "execution_id", "attrs", "source")
    schema = pa.schema(
        [EVENTS_SCHEMA.field(n) if n in EVENTS_SCHEMA.names else pa.field(n, pa.string())
         for n in names]
    )
    batch = pa.record_batch(otlp_native._NativeColumns(columns, schema))
    assert (rows, fallback, runs) == (1, [], False)
    assert batch["example_field"].to_pylist() == ["x"]
    assert batch["job_id"].to_pylist() == ["j-1"]
    assert "example_field" not in batch["attrs"][0].as_py()


def test_the_native_decoder_refuses_a_layout_without_a_job_id() -> None:
    config = otlp_native.native_config(Normaliser())
    at = config["fields"].index("job_id")
    config["fields"] = config["fields"][:at] + ("job_key",) + config["fields"][at + 1 :]
    with pytest.raises(ValueError, match="job_id"):
        otlp_native._otlp_native.Decoder(**config)
