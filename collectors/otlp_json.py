"""OTLP JSON (the file exporter's JSON Lines and OTLP/HTTP JSON bodies) -> protobuf messages.

OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping expects base64;
ids are converted before parsing. Base64 ids (from a generic protobuf JSON printer) are
accepted too, told apart by length.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_HEX_LENGTHS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}
#: JSON levels an OTLP document may nest: more than protobuf's limit of 100 nested
#: messages can take in any case (an attribute's kvlist costs four levels per message).
MAX_DEPTH = 256


class OtlpJsonError(ValueError):
    """A JSON document that is not an OTLP export request."""


_INT_KEYS = ("intValue", "int_value")
_INT64 = (-(2**63), 2**63 - 1)


def _wide_int(node: dict[str, Any]) -> None:
    """An intValue protobuf cannot hold (beyond 64 bits) is kept as the text it was, so
    that its record alone is refused (a canonical field) or keeps it (any other)."""
    for key in _INT_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            try:
                value = int(value)
            except ValueError:
                value = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not _INT64[0] <= value <= _INT64[1]:
                del node[key]
                node["stringValue"] = str(value)


def _fix_ids(document: Any) -> None:
    """Hex ids -> base64 and over-wide integers -> text, in place. A loop, not recursion,
    so that no depth breaks it: a document nested deeper than MAX_DEPTH is refused (one
    within it still meets protobuf's own limit on nested messages)."""
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise OtlpJsonError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            if "intValue" in node or "int_value" in node:
                _wide_int(node)
            for key, value in node.items():
                if key in _ID_HEX_LENGTHS and isinstance(value, str):
                    if value and len(value) == _ID_HEX_LENGTHS[key]:
                        try:
                            node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                        except ValueError as exc:
                            raise OtlpJsonError(f"{key} is not hex: {value!r}") from exc
                elif isinstance(value, dict | list):
                    stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node if isinstance(item, dict | list))


def kind_of(document: dict[str, Any]) -> str | None:
    if "resourceSpans" in document or "resource_spans" in document:
        return "traces"
    if "resourceLogs" in document or "resource_logs" in document:
        return "logs"
    return None


def parse_request(document: dict[str, Any]) -> ExportTraceServiceRequest | ExportLogsServiceRequest:
    kind = kind_of(document)
    if kind is None:
        raise OtlpJsonError("neither resourceSpans nor resourceLogs")
    _fix_ids(document)
    message = ExportTraceServiceRequest() if kind == "traces" else ExportLogsServiceRequest()
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpJsonError(str(exc)) from exc
    return message
