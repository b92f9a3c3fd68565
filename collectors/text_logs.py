"""The worker logs read by a reader of their own (Celery's, Sidekiq's, Dramatiq's, RQ's,
arq's): which one a file is, told from its first bytes, and the reader of its registered
decoder. A line of such a log may end a run an earlier line began, so one reader reads a
file from start to end, in order. `dupescope ingest` and `collect --tail` both ask here,
so a log is told and read alike wherever it comes from."""

from __future__ import annotations

from typing import Any

from collectors.celery_log import CELERY_LOG, CeleryLogOptions, sniff_format
from collectors.decoders import REGISTRY
from collectors.dramatiq_log import DRAMATIQ_LOG, sniff_dramatiq
from collectors.normalise import Normaliser
from collectors.sidekiq_log import SIDEKIQ_LOG, looks_like_sidekiq_log
from collectors.time_of_day import DayBasis
from collectors.time_only_logs import TIME_ONLY_FORMATS
from collectors.time_only_logs import sniff as sniff_time_only
from collectors.worker_log_reader import WorkerLogReader

#: The `--format` names of these logs.
TEXT_LOGS = (CELERY_LOG, SIDEKIQ_LOG, DRAMATIQ_LOG, *TIME_ONLY_FORMATS)

TextLogReader = WorkerLogReader[Any]


def tell(head: bytes, celery: CeleryLogOptions | None = None) -> str | None:
    """The format of a file from its first bytes: one of TEXT_LOGS, `json-lines` when a
    JSON line comes first, None while nothing has told. Sidekiq's is asked first, since its
    JSON format is JSON lines too."""
    if looks_like_sidekiq_log(head):
        return SIDEKIQ_LOG
    told = sniff_time_only(head) or sniff_format(head, celery)
    if told is None and sniff_dramatiq(head):
        return DRAMATIQ_LOG
    return told


def reader(
    fmt: str,
    normaliser: Normaliser,
    source: str,
    *,
    celery: CeleryLogOptions | None = None,
    day: DayBasis | None = None,
) -> TextLogReader:
    """The reader of the registered decoder of `fmt` (one of TEXT_LOGS), configured with
    what its lines lack: Celery's log format and worker, or the date of a time-only log."""
    decoder = REGISTRY.reference(fmt, "text")
    if fmt == CELERY_LOG:
        decoder = decoder.configured(celery)  # type: ignore[attr-defined]
    elif fmt in TIME_ONLY_FORMATS:
        decoder = decoder.configured(day)  # type: ignore[attr-defined]
    made = decoder.reader(normaliser, source)  # type: ignore[attr-defined]
    assert isinstance(made, WorkerLogReader), made
    return made
