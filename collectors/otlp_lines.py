"""OTLP JSON Lines: each line one ExportTraceServiceRequest or ExportLogsServiceRequest."""

from __future__ import annotations

import orjson

from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser
from collectors.otlp import decode_logs, decode_traces
from collectors.otlp_json import OtlpJsonError, kind_of, parse_request


def is_otlp_line(line: bytes) -> bool:
    """Told apart from a log line by its head, so a mixed file needs no flag."""
    head = line[:200]
    return b"resourceSpans" in head or b"resourceLogs" in head or b"resource_spans" in head


def decode_otlp_lines(
    lines: list[tuple[int, bytes]], normaliser: Normaliser, source: str
) -> Decoded:
    """Numbered OTLP lines -> rows; a bad line is rejected with its number."""
    out = Decoded()
    for number, raw in lines:
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            document = orjson.loads(raw)
            if not isinstance(document, dict) or kind_of(document) is None:
                raise OtlpJsonError("not an OTLP export request (no resourceSpans/resourceLogs)")
            request = parse_request(document)
        except (orjson.JSONDecodeError, OtlpJsonError) as exc:
            out.rejected.append(Rejected(where, f"invalid OTLP JSON: {exc}"))
            continue
        decode = decode_traces if kind_of(document) == "traces" else decode_logs
        part = decode(request, normaliser, where)  # type: ignore[arg-type]
        out.rows.extend(part.rows)
        out.rejected.extend(part.rejected)
        out.ignored += part.ignored
    return out
