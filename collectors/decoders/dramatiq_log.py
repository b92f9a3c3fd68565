"""Dramatiq worker logs (`--format dramatiq-log`): text, read line by line in order.

The reference is `dramatiq_log.DramatiqLogReader`, the one reader of these logs: `decode`
reads a whole body (complete lines) with a reader of its own; `reader` gives the reader
that `ingest` and the tail (`collect --tail`) read a log with, piece after piece, since a
line ends the run an earlier piece began.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.dramatiq_log import DRAMATIQ_LOG, DramatiqLogOptions, DramatiqLogReader
from collectors.normalise import Normaliser


@dataclass(frozen=True)
class DramatiqLogText(RunsAnywhere):
    """A Dramatiq worker's log lines, each run's lines tied together by one reader."""

    options: DramatiqLogOptions = field(default_factory=DramatiqLogOptions)
    media: str = "text"
    signal: str = DRAMATIQ_LOG
    name: str = "dramatiq_log.DramatiqLogReader"

    def configured(self, options: DramatiqLogOptions | None) -> DramatiqLogText:
        return replace(self, options=options or DramatiqLogOptions())

    def reader(self, normaliser: Normaliser, source: str) -> DramatiqLogReader:
        """A reader for one log read piece after piece, in order; `source` names the
        host where the options do not."""
        return DramatiqLogReader(normaliser, self.options, name=source)

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        body = bytes(body)
        decoded = self.reader(normaliser, source).decode(body, 1, source)
        lines = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)
        return rows_output(decoded, lines)
