"""Where job events go: the application's tracer provider and, if asked, a logger.

One `Sinks` value is the configuration every emitting call shares; `configure()` sets the
process default, and any call may take its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Tracer, TracerProvider

from dupescope.instrument.fields import default_worker_id

TRACER_NAME = "dupescope.instrument"


@dataclass(frozen=True)
class Sinks:
    """Settings for emitting job events.

    tracer_provider: None means the global one, looked up at each call, so an application
        that sets its provider after importing dupescope still gets the spans.
    logger: a logger (or its name) to also write each event to as a JSON line; None for
        spans only.
    spans: False for teams that want log lines only.
    worker_id: a fixed worker identity (pod name...); by default host:pid at each call.
    """

    tracer_provider: TracerProvider | None = None
    logger: logging.Logger | str | None = None
    spans: bool = True
    worker_id: str | Callable[[], str] = field(default=default_worker_id)

    def tracer(self) -> Tracer:
        from dupescope import __version__

        return trace.get_tracer(TRACER_NAME, __version__, tracer_provider=self.tracer_provider)

    def log(self) -> logging.Logger | None:
        if isinstance(self.logger, str):
            return logging.getLogger(self.logger)
        return self.logger

    def current_worker_id(self) -> str:
        return self.worker_id() if callable(self.worker_id) else self.worker_id


_default = Sinks()


def configure(
    tracer_provider: TracerProvider | None = None,
    logger: logging.Logger | str | None = None,
    *,
    spans: bool = True,
    worker_id: str | Callable[[], str] | None = None,
) -> Sinks:
    """Set the process-wide default sinks; returns them."""
    global _default
    _default = Sinks(
        tracer_provider=tracer_provider,
        logger=logger,
        spans=spans,
        worker_id=worker_id or default_worker_id,
    )
    return _default


def current(sinks: Sinks | None = None) -> Sinks:
    """The sinks a call should use: its own, else the process default."""
    return sinks if sinks is not None else _default
