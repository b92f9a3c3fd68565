"""Sidekiq's logs (`--format sidekiq-log`): text, read line by line in order.

The reference is `sidekiq_log.SidekiqLogReader`, the one reader of these logs: `decode`
reads a whole body with a reader of its own; a log read in pieces (`dupescope ingest`, a
block at a time; the tail, `collect --tail`, across its reads) is one reader's work, piece
after piece, because a line (`done`, a push-back at shutdown) ends the run an earlier
piece began: `reader` gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser
from collectors.sidekiq_log import SIDEKIQ_LOG, SidekiqLogOptions, SidekiqLogReader


@dataclass(frozen=True)
class SidekiqLogText(RunsAnywhere):
    """A Sidekiq process's log lines (default or JSON format), each run's lines tied
    together by one reader."""

    options: SidekiqLogOptions = field(default_factory=SidekiqLogOptions)
    media: str = "text"
    signal: str = SIDEKIQ_LOG
    name: str = "sidekiq_log.SidekiqLogReader"

    def configured(self, options: SidekiqLogOptions | None) -> SidekiqLogText:
        return replace(self, options=options or SidekiqLogOptions())

    def reader(self, normaliser: Normaliser, source: str) -> SidekiqLogReader:
        """A reader for one log read piece after piece, in order; `source` names the host
        where the options do not."""
        return SidekiqLogReader(normaliser, self.options, name=source)

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        body = bytes(body)
        decoded = self.reader(normaliser, source).decode(body, 1, source)
        lines = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)
        return rows_output(decoded, lines)
