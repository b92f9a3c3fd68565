"""OTLP JSON Lines: each line one ExportTraceServiceRequest or ExportLogsServiceRequest."""

from __future__ import annotations

import orjson

from collectors.jsonlines import Decoded, Rejected, decode_lines
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


def decode_batch(lines: list[tuple[int, bytes]], normaliser: Normaliser, source: str) -> Decoded:
    """Lines of either format, told apart line by line (the per-record reference path)."""
    otlp = [(n, line) for n, line in lines if is_otlp_line(line)]
    if not otlp:
        return decode_lines(lines, normaliser, source)
    plain = [(n, line) for n, line in lines if not is_otlp_line(line)]
    out = decode_otlp_lines(otlp, normaliser, source)
    rest = decode_lines(plain, normaliser, source)
    out.rows.extend(rest.rows)
    out.rejected.extend(rest.rejected)
    out.rejected.sort(key=lambda r: r.where)
    return out
