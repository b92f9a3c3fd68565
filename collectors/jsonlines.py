"""JSON-lines logs: one JSON object per line -> canonical rows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from collectors.normalise import MAX_DEPTH, Normaliser, RecordError, Row, flatten, nesting


@dataclass
class Rejected:
    """A record that was refused: where it was and why."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass
class Decoded:
    rows: list[Row] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    ignored: int = 0


def decode_lines(
    lines: Iterable[tuple[int, bytes]], normaliser: Normaliser, source: str
) -> Decoded:
    """Decode numbered lines; a bad line is rejected with its number, the rest are kept.

    The event_uid is a hash of the line's content (`uids.py`), so the same line ingested
    twice (again from the same file, from a rotated copy, or posted twice) collapses to one
    event.
    """
    from collectors.uids import line_uids  # here: it brings polars, which OTLP never needs

    out = Decoded()
    numbered = [(number, raw.strip()) for number, raw in lines]
    numbered = [(number, line) for number, line in numbered if line]
    uids = line_uids([line for _, line in numbered])
    for (number, line), uid in zip(numbered, uids, strict=True):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            out.rejected.append(Rejected(f"{source}:{number}", f"invalid JSON: {exc}"))
            continue
        if not isinstance(record, dict):
            kind = type(record).__name__
            out.rejected.append(Rejected(f"{source}:{number}", f"expected an object, got {kind}"))
            continue
        # Nesting is measured only where the brackets could reach the limit at all.
        if line.count(b"{") + line.count(b"[") > MAX_DEPTH and nesting(record) > MAX_DEPTH:
            reason = f"nested deeper than {MAX_DEPTH} levels"
            out.rejected.append(Rejected(f"{source}:{number}", reason))
            continue
        try:
            row = normaliser.normalise(flatten(record), uid=uid, source=source)
        except RecordError as exc:
            out.rejected.append(Rejected(f"{source}:{number}", str(exc)))
            continue
        out.rows.append(row)
    return out
