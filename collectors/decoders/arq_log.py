"""Arq's worker logs (`--format arq-log`): text, read line by line in order.

The reference is `arq_log.ArqLogReader`, the one reader of these logs: `decode` reads a
whole body (complete lines) with a reader of its own; a log read in pieces (`dupescope
ingest`, a tail) is one reader's work, piece after piece (`reader`), because a line ends
the run an earlier piece began. What the lines do not say, the date of their times, comes
as a `DayBasis`: `configured` gives the decoder for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from collectors.arq_log import ARQ_LOG, ArqLogReader
from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser
from collectors.time_of_day import DayBasis


@dataclass(frozen=True)
class ArqLogText(RunsAnywhere):
    """Arq worker log lines, each run's lines tied together by one reader."""

    basis: DayBasis = field(default_factory=DayBasis)
    media: str = "text"
    signal: str = ARQ_LOG
    name: str = "arq_log.ArqLogReader"

    def configured(self, basis: DayBasis | None) -> ArqLogText:
        return replace(self, basis=basis or DayBasis())

    def reader(self, normaliser: Normaliser, source: str) -> ArqLogReader:
        """A reader for one log read piece after piece, in order; `source` names the
        worker where the log does not."""
        return ArqLogReader(normaliser, self.basis, name=source)

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        body = bytes(body)
        decoded = self.reader(normaliser, source).decode(body, 1, source)
        lines = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)
        return rows_output(decoded, lines)
