"""The worker logs whose lines carry only a time of day (RQ's, arq's): which one a file
is, and the reader of its registered decoder, dated by the file (collectors/
time_of_day.py). `dupescope ingest` and `collect --tail` ask here."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from collectors import arq_log, rq_log
from collectors.arq_log import ARQ_LOG
from collectors.decoders import REGISTRY
from collectors.decoders.arq_log import ArqLogText
from collectors.decoders.rq_log import RqLogText
from collectors.normalise import Normaliser
from collectors.queue_log import QueueLogReader
from collectors.rq_log import RQ_LOG
from collectors.time_of_day import DayBasis

#: The `--format` names of these logs.
TIME_ONLY_FORMATS = (RQ_LOG, ARQ_LOG)


def sniff(head: bytes) -> str | None:
    """`rq-log` or `arq-log` when a file's first lines are such a worker's, else None."""
    if rq_log.sniff(head):
        return RQ_LOG
    if arq_log.sniff(head):
        return ARQ_LOG
    return None


def basis_for(path: str, given: DayBasis | None) -> DayBasis:
    """The dating of one file: `--date` where given, else the file's modification time
    (now for stdin)."""
    given = given or DayBasis()
    if given.date is not None:
        return given
    try:
        moment = datetime.fromtimestamp(os.stat(path).st_mtime, UTC)
    except (OSError, ValueError):
        moment = datetime.now(UTC)
    return given.with_reference(moment)


def reader(fmt: str, normaliser: Normaliser, basis: DayBasis, source: str) -> QueueLogReader:
    """The registered decoder's reader for one log read block after block, in order."""
    decoder = REGISTRY.reference(fmt, "text")
    assert isinstance(decoder, RqLogText | ArqLogText), decoder
    return decoder.configured(basis).reader(normaliser, source)
