"""OTLP export request bodies -> their protobuf messages, in either media type."""

from __future__ import annotations

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collectors.decoders.base import Refused
from collectors.otlp_json import OtlpJsonError, kind_of, parse_request

OtlpRequest = ExportTraceServiceRequest | ExportLogsServiceRequest


def parse(signal: str, body: bytes, media: str) -> OtlpRequest:
    """Bytes -> the export request message of `signal`; Refused when it is not one."""
    if media == "protobuf":
        message = ExportTraceServiceRequest() if signal == "traces" else ExportLogsServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise Refused(f"undecodable protobuf body: {exc}") from exc
        return message
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Refused(f"invalid JSON body: {exc}") from exc
    if not isinstance(document, dict):
        raise Refused(f"expected a JSON object, got {type(document).__name__}")
    if not document:
        document = {"resourceSpans" if signal == "traces" else "resourceLogs": []}
    if kind_of(document) != signal:
        expected = "resourceSpans" if signal == "traces" else "resourceLogs"
        raise Refused(f"not an OTLP {signal} request: no {expected}")
    try:
        return parse_request(document)
    except OtlpJsonError as exc:
        raise Refused(f"invalid OTLP JSON: {exc}") from exc


def traces(body: bytes, media: str) -> ExportTraceServiceRequest:
    request = parse("traces", body, media)
    assert isinstance(request, ExportTraceServiceRequest)
    return request


def logs(body: bytes, media: str) -> ExportLogsServiceRequest:
    request = parse("logs", body, media)
    assert isinstance(request, ExportLogsServiceRequest)
    return request
