"""Request bodies -> canonical Arrow batches, or a clear reason why not.

This is the one place that knows the OTLP/HTTP body rules (content types, gzip and
deflate, size limits) and turns them into typed errors the receivers map to 400, 413 and
415. The body itself goes to the decoder the registry (collectors/decoders) serves its
signal and media type with. It is pure (bytes in, table out), so it can run in a decoding worker
process.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from collectors.arrow_batch import rows_to_table
from collectors.decoders import REGISTRY, Refused
from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser

PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})
JSON_TYPES = frozenset({"application/json"})
LINES_TYPES = frozenset(
    {"application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain",
     "application/json"}
)
MAX_REASONS = 5


class BodyError(ValueError):
    """A body refused whole; `status` is the HTTP answer (400, 413 or 415)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type, tuple[int, str]]:
        # Raised in a decoding worker process and re-raised in the receiver.
        return (BodyError, (self.status, str(self)))


@dataclass
class DecodeResult:
    """What one request gave: rows to store, and what was refused or not a job event."""

    table: pa.Table
    rejected: int = 0
    ignored: int = 0
    message: str = ""
    accepted: int = 0  # rows handed to the store (set once they are durable)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


#: How much of a compressed body is inflated at a time, each step reserved first.
INFLATE_STEP = 1 << 20

Reserve = Callable[[int], None]


def gunzip(body: bytes, limit: int, reserve: Reserve | None = None) -> bytes:
    """Inflate at most `limit` bytes: a small gzip bomb costs us `limit`, never more.
    `reserve(n)`, called before the output may grow to `n` bytes, can refuse by raising."""
    out = bytearray()
    data = body
    while data:  # gzip members may follow one another
        data = _inflate_into(out, data, limit, zlib.decompressobj(wbits=31), "gzip", reserve)
    return bytes(out)


def inflate(body: bytes, limit: int, reserve: Reserve | None = None) -> bytes:
    """`Content-Encoding: deflate` (a zlib stream, as RFC 9110 has it and OpenTelemetry's
    Python exporter sends it), at most `limit` bytes, like gunzip."""
    out = bytearray()
    if _inflate_into(out, body, limit, zlib.decompressobj(wbits=15), "deflate", reserve):
        raise BodyError(400, "bytes after the end of the deflate body")
    return bytes(out)


def _inflate_into(
    out: bytearray, data: bytes, limit: int, inflater: Any, name: str, reserve: Reserve | None
) -> bytes:
    """One compressed stream of `data` appended to `out`, `INFLATE_STEP` bytes at a time;
    the bytes after it."""
    try:
        while True:
            step = min(INFLATE_STEP, limit + 1 - len(out))
            if reserve is not None:
                reserve(len(out) + step)
            out += inflater.decompress(data, step)
            data = inflater.unconsumed_tail
            if inflater.eof or not data or len(out) > limit:
                break
    except zlib.error as exc:
        raise BodyError(400, f"invalid {name} body: {exc}") from exc
    if len(out) > limit:
        raise BodyError(413, f"body is larger than {limit} bytes once decompressed")
    if not inflater.eof:
        raise BodyError(400, f"truncated {name} body")
    return inflater.unused_data


def unwrap(
    body: bytes, encoding: str | None, limit: int, reserve: Reserve | None = None
) -> bytes:
    """Apply Content-Encoding (identity, gzip or deflate) under the size limit; `reserve`
    is asked before the decompressed body grows (see gunzip)."""
    encoding = (encoding or "identity").strip().lower()
    if len(body) > limit:
        raise BodyError(413, f"body is larger than {limit} bytes")
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return gunzip(body, limit, reserve)
    if encoding == "deflate":
        return inflate(body, limit, reserve)
    raise BodyError(
        415, f"unsupported Content-Encoding {encoding!r} (use gzip, deflate or none)"
    )


def summarise(rejected: list[Rejected], what: str) -> tuple[int, str]:
    """The partial_success count (distinct records) and a message naming what and where."""
    if not rejected:
        return 0, ""
    records = {r.where.split(" event ", 1)[0] for r in rejected}
    shown = "; ".join(str(r) for r in rejected[:MAX_REASONS])
    more = f"; and {len(rejected) - MAX_REASONS} more" if len(rejected) > MAX_REASONS else ""
    return len(records), f"{len(records)} {what} rejected: {shown}{more}"


#: What a refused record is called in a partial-success message, by signal.
_RECORDS = {"traces": "spans", "logs": "log records"}


def decode(
    signal: str, media: str, body: bytes, normaliser: Normaliser, source: str
) -> DecodeResult:
    """A body (already unwrapped) of one source -> rows, partial-success counts; decoded
    by the decoder the registry serves that source with. BodyError(400) for a body that
    is not one of the source's."""
    decoder = REGISTRY.serving(signal, media)
    try:
        output = decoder.decode(body, normaliser, source)
    except Refused as exc:
        raise BodyError(400, str(exc)) from exc
    except RecursionError as exc:  # the parsers bound depth; this is the last guard
        raise BodyError(400, "body nested too deeply") from exc
    if signal == "lines":
        return from_decoded(Decoded(rejected=output.rejected, ignored=output.ignored),
                            output.table)
    count, message = summarise(output.rejected, _RECORDS[signal])
    return DecodeResult(output.table, count, output.ignored, message)


def decode_otlp(
    kind: str, body: bytes, fmt: str, normaliser: Normaliser, source: str
) -> DecodeResult:
    """An OTLP export request body (already unwrapped) -> rows, partial-success counts."""
    return decode(kind, fmt, body, normaliser, source)


def decode_jsonlines(body: bytes, normaliser: Normaliser, source: str) -> DecodeResult:
    """A JSON-lines body (plain logs or OTLP JSON Lines, line by line)."""
    return decode("lines", "ndjson", body, normaliser, source)


def from_decoded(decoded: Decoded, table: pa.Table | None = None) -> DecodeResult:
    """Decoded lines -> rows to commit, with the count and reasons of the lines refused.
    `table`, where given, holds the rows (and `decoded.rows` is not read)."""
    count = len(decoded.rejected)
    shown = "; ".join(str(r) for r in decoded.rejected[:MAX_REASONS])
    message = f"{count} lines rejected: {shown}" if count else ""
    rows = rows_to_table(decoded.rows) if table is None else table
    return DecodeResult(rows, count, decoded.ignored, message)
