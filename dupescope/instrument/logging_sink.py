"""Job events as JSON lines through the standard `logging` module.

The record's message is the JSON line itself, so any handler with the default `%(message)s`
format writes a line `dupescope ingest` and the collector's `--tail` read as they are. The
same fields ride on the record as `job_event`, for teams whose formatter builds its own
JSON (python-json-logger, structlog): `JsonLineFormatter` shows how.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

#: The attribute of a `logging.LogRecord` holding the event's fields.
RECORD_ATTRIBUTE = "job_event"


def to_line(fields: Mapping[str, Any]) -> str:
    """Compact JSON; values JSON cannot hold are written as text rather than lost."""
    return json.dumps(fields, separators=(",", ":"), default=str)


def log_event(logger: logging.Logger, fields: Mapping[str, Any], level: int = logging.INFO) -> None:
    """Write one event; a failing handler is logging's business, never the job's."""
    if logger.isEnabledFor(level):
        logger.log(level, "%s", to_line(fields), extra={RECORD_ATTRIBUTE: dict(fields)})


class JsonLineFormatter(logging.Formatter):
    """Job events as their JSON line; other records as a JSON line with `ts`, `level`, `msg`.

    For a handler that receives both job events and ordinary application logs and must
    still write one JSON object per line.
    """

    converter = time.gmtime  # timestamps in UTC, as the `Z` says

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, RECORD_ATTRIBUTE, None)
        if isinstance(fields, dict):
            return to_line(fields)
        line = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return to_line(line)
