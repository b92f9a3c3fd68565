"""Celery worker logs (`--format celery-log`): text, read line by line in order.

The reference is `celery_log.CeleryLogReader`, the one reader of these logs: `decode` reads
a whole body (complete lines) with a reader of its own. A log read in pieces (`dupescope
ingest`, a block at a time) is one reader's work, piece after piece, because a line ends
the run an earlier piece began: `reader` gives it. The tail (`collect --tail`,
collectors/service/tail.py) keeps such a reader per path too, across its reads, and also
holds back a WorkerLostError while later lines may say whose run it ended
(`decode_growing`), so it reads through `CeleryLogReader` directly, not `decode`. All
three read with the same module.

What the logs do not say (the node's name, the zone of its clock, a custom line format)
comes as `CeleryLogOptions`: `configured` gives the decoder for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from collectors.celery_log import CELERY_LOG, CeleryLogOptions, CeleryLogReader
from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser


@dataclass(frozen=True)
class CeleryLogText(RunsAnywhere):
    """A Celery worker's log lines, each run's lines tied together by one reader."""

    options: CeleryLogOptions = field(default_factory=CeleryLogOptions)
    media: str = "text"
    signal: str = CELERY_LOG
    name: str = "celery_log.CeleryLogReader"

    def configured(self, options: CeleryLogOptions | None) -> CeleryLogText:
        return replace(self, options=options or CeleryLogOptions())

    def reader(self, normaliser: Normaliser, source: str) -> CeleryLogReader:
        """A reader for one log read piece after piece, in order; `source` names the
        worker where neither the options nor the log do."""
        return CeleryLogReader(normaliser, self.options, name=source)

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        body = bytes(body)
        decoded = self.reader(normaliser, source).decode(body, 1, source)
        lines = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)
        return rows_output(decoded, lines)
