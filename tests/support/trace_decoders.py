"""The native trace decoder's answer on a request beside the reference decoder's, in forms
a test compares."""

from __future__ import annotations

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collectors.arrow_batch import rows_to_table
from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from collectors.otlp_native import NativeTraceDecoder
from store.schema import as_events


def native_and_reference(
    request: ExportTraceServiceRequest, mapping: FieldMapping = DEFAULT_MAPPING
) -> tuple[tuple[pa.Table, list, int], tuple[pa.Table, list, int]]:
    normaliser = Normaliser(mapping)
    body = request.SerializeToString()
    table, rejected, ignored = NativeTraceDecoder(normaliser).decode(
        body, lambda: request, "src"
    )
    table = as_events(table)
    reference = decode_traces(request, normaliser, "src")
    rejects = [(r.where, r.reason) for r in rejected]
    expected = [(r.where, r.reason) for r in reference.rejected]
    # Native rows come first, the spans left to the Python path after them.
    return (
        (table.sort_by("event_uid"), rejects, ignored),
        (rows_to_table(reference.rows).sort_by("event_uid"), expected, reference.ignored),
    )

