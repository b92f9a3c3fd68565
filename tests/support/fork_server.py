"""A child-process server for kill sweeps: import once, then fork a process per request.

A kill sweep runs many short steps, each in a process of its own (a step may be killed, and
chDB serves one folder per process). A fresh interpreter spends a second or more on
imports before each step; a fork of a server that imported everything once starts with
the imports done and no thread or store open yet.

The server (`serve`, in the child script) reads one request a line on stdin, forks a
process that runs it, and writes a line `STATUS ANSWER`: the process's exit status (minus
the signal that killed it) and what the step answered (empty when it did not live to
say). The client (`ForkServer`, in the test) sends requests and reads those lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path


def serve(step: Callable[[list[str]], str]) -> None:
    """Run `step` on each request line's words in a forked process, until stdin ends."""
    for line in sys.stdin:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child runs the step, says what it found, and ends
            os.close(read)
            try:
                os.write(write, step(line.split()).encode())
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            found = answer.read().decode()
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), found, flush=True)


class ForkServer:
    """The test's side: the server script started once, asked one request at a time."""

    def __init__(self, script: Path) -> None:
        self._server = subprocess.Popen([sys.executable, str(script), "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)

    def ask(self, *request: str) -> tuple[int, str]:
        """(exit status, answer) of one request."""
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write(" ".join(request) + "\n")
        self._server.stdin.flush()
        status, _, answer = self._server.stdout.readline().rstrip("\n").partition(" ")
        return int(status), answer

    def close(self) -> None:
        assert self._server.stdin is not None
        self._server.stdin.close()
        self._server.wait(timeout=60)
