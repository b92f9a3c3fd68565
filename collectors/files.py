"""`dupescope ingest`: JSON-lines logs and OTLP JSON Lines files into a store.

The format is detected from content (an OTLP line holds resourceSpans/resourceLogs), so a
folder of mixed files needs no flags. Rows are written in bulk batches; a bad line is
reported with file, line number and reason, and the rest is kept.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from collectors.arrow_batch import rows_to_table
from collectors.jsonlines import Decoded, Rejected, decode_lines
from collectors.normalise import Normaliser
from collectors.otlp import decode_logs, decode_traces
from collectors.otlp_json import OtlpJsonError, kind_of, parse_request
from store.base import Store

BATCH_LINES = 50_000


@dataclass
class IngestReport:
    """What an ingest did: counts for the closing summary, and every rejected record."""

    files: int = 0
    lines: int = 0
    rows: int = 0
    ignored: int = 0
    rejected: list[Rejected] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.rows} events stored from {self.files} file(s), {self.lines} lines; "
            f"{len(self.rejected)} rejected, {self.ignored} spans ignored (no lifecycle step)"
        )


def _open(path: str) -> tuple[BinaryIO, int | None]:
    """A binary stream and its size in bytes (for progress), transparently gunzipped."""
    if path == "-":
        return sys.stdin.buffer, None
    handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by the caller
    size = Path(path).stat().st_size
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return gzip.GzipFile(fileobj=handle), size  # type: ignore[return-value]
    handle.seek(0)
    return handle, size


def _is_otlp_line(line: bytes) -> bool:
    head = line[:200]
    return b"resourceSpans" in head or b"resourceLogs" in head or b"resource_spans" in head


def decode_otlp_lines(
    lines: list[tuple[int, bytes]], normaliser: Normaliser, source: str
) -> Decoded:
    """OTLP JSON Lines: each line one ExportTraceServiceRequest or ExportLogsServiceRequest."""
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
    """Lines of either format, told apart line by line."""
    otlp = [(n, line) for n, line in lines if _is_otlp_line(line)]
    if not otlp:
        return decode_lines(lines, normaliser, source)
    plain = [(n, line) for n, line in lines if not _is_otlp_line(line)]
    out = decode_otlp_lines(otlp, normaliser, source)
    rest = decode_lines(plain, normaliser, source)
    out.rows.extend(rest.rows)
    out.rejected.extend(rest.rejected)
    out.rejected.sort(key=lambda r: r.where)
    return out


def _batches(stream: BinaryIO, size: int) -> Iterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    for number, line in enumerate(stream, start=1):
        batch.append((number, line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def ingest_files(
    paths: list[str],
    store: Store,
    normaliser: Normaliser | None = None,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_rejected: Callable[[Rejected], None] | None = None,
) -> IngestReport:
    """Read every file, write rows in bulk; `on_progress` receives bytes consumed."""
    normaliser = normaliser or Normaliser()
    report = IngestReport()
    for path in paths:
        stream, _ = _open(path)
        source = "stdin" if path == "-" else path
        report.files += 1
        position = _position_reader(stream, path)
        try:
            for batch in _batches(stream, BATCH_LINES):
                report.lines += len(batch)
                decoded = decode_batch(batch, normaliser, source)
                if decoded.rows:
                    report.rows += store.write(rows_to_table(decoded.rows))
                report.ignored += decoded.ignored
                report.rejected.extend(decoded.rejected)
                if on_rejected:
                    for rejected in decoded.rejected:
                        on_rejected(rejected)
                if on_progress:
                    on_progress(position())
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return report


def _position_reader(stream: BinaryIO, path: str) -> Callable[[], int]:
    """How far into the file (compressed bytes for .gz) reading has come."""
    if path == "-":
        return lambda: 0
    underlying = getattr(stream, "fileobj", None) or stream
    return lambda: underlying.tell()
