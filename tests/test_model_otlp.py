"""The OTLP JSON Lines form parses as ExportTraceServiceRequest and matches the model."""

from __future__ import annotations

import io

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import sample_data
from sample_data.otlp import parse_otlp_json_line, write_otlp_jsonl


@pytest.fixture(scope="module")
def lines() -> tuple[sample_data.Workload, list[bytes]]:
    w = sample_data.generate(seed=9, target_events=3000, worker_crash=0.05)
    buf = io.BytesIO()
    write_otlp_jsonl(w, buf)
    return w, buf.getvalue().splitlines()


def test_every_line_parses_with_json_format(lines: tuple[sample_data.Workload, list[bytes]]
                                            ) -> None:
    for line in lines[1]:
        req = json_format.Parse(line, ExportTraceServiceRequest())
        assert req.resource_spans


def test_ids_are_hex_and_round_trip(lines: tuple[sample_data.Workload, list[bytes]]) -> None:
    req = parse_otlp_json_line(lines[1][0])
    span = req.resource_spans[0].scope_spans[0].spans[0]
    assert len(span.trace_id) == 16 and len(span.span_id) == 8


def test_one_process_span_per_surviving_execution(
        lines: tuple[sample_data.Workload, list[bytes]]) -> None:
    w, raw = lines
    spans = [s for line in raw for rs in parse_otlp_json_line(line).resource_spans
             for ss in rs.scope_spans for s in ss.spans]
    process = [s for s in spans if s.name.endswith(" process")]
    lost = w.truth["otlp_lost_executions"]
    assert lost
    assert len(process) == len(w.model.executions) - len(lost)
    assert all(ev.name != "deliver" for s in process for ev in s.events)
