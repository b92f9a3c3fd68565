"""Who holds a lock shared through a database, and whether that holder is gone.

A refill of the OpenTelemetry Collector's tables (store/otel.py) is one process at a time,
locked by a table in the store's own database. A process killed while it holds the lock
cannot give it back; the next one must tell a dead holder from a slow one without waiting
out a long staleness. A holder names itself by host and process id: on the same host (and
in the same process-id namespace, so two containers sharing a host name are not confused)
a holder whose process no longer exists is gone at once; elsewhere only the age of its
last mark can tell.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass


def this_host() -> str:
    """This host's name with its process-id namespace: pids compare only within one."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}" if namespace else socket.gethostname()


def running(pid: int) -> bool:
    """Whether a process of this id exists on this host (of another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """The lock's holder as its last mark names it, and that mark's age in seconds."""

    host: str
    pid: int
    age: int

    def gone(self, stale_after: float) -> bool:
        """Whether the lock may be taken over: its holder's process is known to have
        ended, or it has not marked the lock for longer than `stale_after` seconds."""
        if self.host == this_host() and not running(self.pid):
            return True
        return self.age > stale_after
