"""What every test with real Celery workers needs: a worker in a process group of its own
(so that a SIGKILL takes its pool processes with it, as a lost host or an OOM kill does),
stopped warm or killed; and the removal of what a test made in the shared Redis and
RabbitMQ (never a FLUSHDB)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any


class WorkerProcess:
    """`command` (a Celery worker) started in a session of its own."""

    def __init__(
        self, command: Sequence[str], *, env: dict[str, str], cwd: Any = None,
        stdout: int | IO[Any] | None = None, stderr: int | IO[Any] | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            list(command), cwd=cwd, env=env, stdout=stdout, stderr=stderr,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        """SIGTERM, a warm shutdown: the running tasks finish, spans are flushed."""
        if self.alive():
            self.process.terminate()

    def _signal_group(self, signum: int) -> None:
        """`signum` to the main process and its pool processes at once (none are left:
        nothing)."""
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def stop_group(self) -> None:
        """SIGSTOP: the processes hold their broker connections open but take and run
        nothing more until killed."""
        self._signal_group(signal.SIGSTOP)

    def kill_group(self) -> None:
        """SIGKILL to the main process and its pool processes at once."""
        self._signal_group(signal.SIGKILL)

    def kill(self, wait_s: float = 10) -> None:
        """SIGKILL, all at once: no task finishes, nothing is acknowledged or exported."""
        self.kill_group()
        self.process.wait(wait_s)

    def stop(self, timeout_s: float = 20) -> None:
        """A warm shutdown; killed if it has not ended within `timeout_s`."""
        self.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_group()
            self.process.wait(10)


def says_ready(log: Path, nodename: str = "") -> bool:
    """Whether a worker's log says it consumes: Celery logs `NODENAME ready.` once it does."""
    return log.exists() and f"{nodename} ready." in log.read_text(errors="replace")


def delete_redis_keys(client: Any, *patterns: str) -> None:
    """Every key matching one of `patterns` (SCAN globs), in batches."""
    names = [name for pattern in patterns for name in client.scan_iter(match=pattern, count=1000)]
    for start in range(0, len(names), 500):
        client.delete(*names[start:start + 500])


def delete_queues_and_exchanges(
    url: str, queues: Iterable[str] = (), exchanges: Iterable[str] = ()
) -> None:
    """The named queues and exchanges, through kombu, on any broker; one already gone is
    no error. On Redis, an exchange is its binding keys (kombu's permanent ones too)."""
    from kombu import Connection

    with Connection(url, connect_timeout=5) as connection:
        channel = connection.default_channel
        for name in queues:
            try:
                channel.queue_delete(name)
            except Exception:
                channel = connection.channel()  # amqp closes a channel that failed
        if connection.transport.driver_type == "redis":
            for name in exchanges:
                channel.client.delete(f"_kombu.binding.{name}", f"_kombu.binding_permanent.{name}")
            return
        for name in exchanges:
            try:
                channel.exchange_delete(name)
            except Exception:
                channel = connection.channel()
