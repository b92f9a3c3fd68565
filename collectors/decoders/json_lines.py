"""JSON lines (plain logs, or OTLP JSON Lines, told apart line by line).

The reference reads line by line (`otlp_lines.decode_batch`). The block decoder (`blocks`)
reads a block's lines a column at a time where that is exact, for files of many MB.
The block decoder imports polars, which a collector that only takes OTLP never needs:
when it decodes, not with the module.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser
from collectors.otlp_lines import decode_batch


@dataclass(frozen=True)
class LinesReference(RunsAnywhere):
    """Line by line: each line's number and reason where it is refused."""

    media: str = "ndjson"
    signal: str = "lines"
    name: str = "otlp_lines.decode_batch"

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        # A line ends at a newline only, as the block decoder and every JSON-lines writer
        # count them (`splitlines` would also end one at a bare CR, which JSON allows
        # between values); a CR before the newline is whitespace to the decoder.
        pieces = bytes(body).split(b"\n")  # bytes, not bytearray
        if pieces[-1] == b"":
            pieces.pop()
        lines = list(enumerate(pieces, start=1))
        decoded = decode_batch(lines, normaliser, source)
        return rows_output(decoded, len(lines))


@dataclass(frozen=True)
class LinesBlocks:
    """A block of lines a column at a time, the lines it cannot read exactly line by line.

    With `views`, rows may come in VIEW_SCHEMA (see `GivesViews`).
    """

    media: str = "ndjson"
    signal: str = "lines"
    name: str = "blocks.BlockDecoder"
    bulk: bool = True
    views: bool = False

    def with_views(self) -> LinesBlocks:
        return replace(self, views=True)

    def available(self) -> bool:
        return True

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        from collectors.blocks import BlockDecoder

        # Building one costs microseconds: nothing to keep between blocks.
        decoder = BlockDecoder(normaliser.mapping, views=self.views)
        result = decoder.decode(bytes(body), 1, source)
        return Output(result.table, result.rejected, result.ignored, result.lines)
