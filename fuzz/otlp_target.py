"""Differential fuzz target: the native OTLP decoder against the reference.

Each input is an ExportTraceServiceRequest body, mutated from fuzz/seeds/otlp/. It is
decoded the way the collector decodes it (collectors.otlp_native over the sanitizer
build of _otlp_native.c, with otlp_columns for the spans it hands back) and by the
reference (protobuf's parser, then collectors.otlp.decode_traces), under the built-in
mapping and under a user mapping. Both must refuse the body, or give the same rows, the
same rejections and the same count of ignored spans; the native columns must be valid
Arrow. A difference raises (libFuzzer keeps the input as a finding), and so does any
sanitizer report.

Run by fuzz/run.sh; `fuzz/replay.sh otlp FILE...` replays inputs (docs/fuzzing.md).
"""

from __future__ import annotations

import sys
import zlib

import atheris
import native

native.load("_otlp_native")

with atheris.instrument_imports(include=["collectors"]):
    from collectors.arrow_batch import rows_to_table
    from collectors.mapping import DEFAULT_MAPPING, FieldMapping
    from collectors.normalise import Normaliser
    from collectors.otlp import decode_traces
    from collectors.otlp_native import NativeTraceDecoder

import pyarrow as pa  # noqa: E402
from google.protobuf.message import DecodeError  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from store.schema import as_events  # noqa: E402

# A user mapping: aliases that rank before the built-in spellings of three fields.
MAPPINGS = {
    "built-in": DEFAULT_MAPPING,
    "user": FieldMapping(fields={"idempotency_key": ("order.key",), "job_id": ("task.uuid",),
                                 "resource_key": ("tenant",)}),
}
NORMALISERS = {name: Normaliser(mapping) for name, mapping in MAPPINGS.items()}
# One decoder per mapping for the whole run, as in the collector: each request presizes
# its buffers from the sizes the last one reached.
DECODERS = {name: NativeTraceDecoder(n) for name, n in NORMALISERS.items()}
if any(d.native is None for d in DECODERS.values()):
    sys.exit("the native decoder is not in use for these mappings: nothing to fuzz")

Outcome = tuple[pa.Table, list[tuple[str, str]], int] | None  # None: the body is refused


def parse(body: bytes) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(body)


def reference(body: bytes, normaliser: Normaliser) -> Outcome:
    try:
        request = parse(body)
    except DecodeError:
        return None
    decoded = decode_traces(request, normaliser, "src")
    rejected = [(r.where, r.reason) for r in decoded.rejected]
    return rows_to_table(decoded.rows), rejected, decoded.ignored


def accelerated(body: bytes, decoder: NativeTraceDecoder) -> Outcome:
    try:
        table, rejected, ignored = decoder.decode(body, lambda: parse(body), "src")
    except DecodeError:
        return None
    table.validate(full=True)  # offsets, validity and run ends as the extension wrote them
    return as_events(table), [(r.where, r.reason) for r in rejected], ignored


def in_order(table: pa.Table) -> list[dict]:
    """The rows in one order whatever the decoder's: the native rows come first, the
    spans it handed back after them. (As Python values: for the few rows of a fuzzed
    body, sorting them costs a tenth of Arrow's sort of each column.)"""
    return sorted(table.to_pylist(), key=repr)


def difference(native_out: Outcome, reference_out: Outcome) -> str | None:
    if native_out is None or reference_out is None:
        if native_out is reference_out:
            return None
        return "refused by the reference only" if native_out else "refused natively only"
    (table, rejected, ignored), (expected, expected_rejected, expected_ignored) = (
        native_out, reference_out)
    if not table.schema.equals(expected.schema):
        return f"schema:\n{table.schema}\n!=\n{expected.schema}"
    got, want = in_order(table), in_order(expected)
    if got != want:
        extra = [r for r in got if r not in want]
        missing = [r for r in want if r not in got]
        return f"rows differ: native only {extra[:3]}; reference only {missing[:3]}"
    if rejected != expected_rejected:
        return f"rejections: {rejected} != {expected_rejected}"
    if ignored != expected_ignored:
        return f"ignored spans: {ignored} != {expected_ignored}"
    return None


def mappings(body: bytes) -> list[str]:
    """The built-in mapping for every body, the user mapping for one in four (chosen by
    the body, so a finding replays under the same mappings)."""
    return ["built-in", "user"] if zlib.crc32(body) % 4 == 0 else ["built-in"]


def test_one_input(body: bytes) -> None:
    for name in mappings(body):
        decoder = DECODERS[name]
        found = difference(accelerated(body, decoder), reference(body, NORMALISERS[name]))
        if found:
            raise AssertionError(f"native and reference differ ({name} mapping): {found}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
