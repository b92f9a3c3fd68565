"""Crash points for testing recovery: `watch` dies where an operator's kill -9 might land.

Set DUPESCOPE_ALERTS_FAULT to a point name (`after_outbox`: incidents recorded and their
deliveries queued, nothing sent; `after_send`: a receiver got the alert, the outbox does
not know yet) and the process kills itself with SIGKILL there: no cleanup, no flush.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after_outbox", "after_send")
ENV = "DUPESCOPE_ALERTS_FAULT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
