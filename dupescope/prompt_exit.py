"""An exit without the interpreter's teardown, for a command whose work is on disk.

Freeing what a large ingest loaded (polars, pyarrow, pandas, DuckDB, thousands of module
objects) takes 0.2-0.3 s after the last segment is durable: a tenth of what reading a
400 MB file costs. A command that has closed its store and has nothing left to do but
exit asks for this; the `dupescope` program then flushes its output and ends the process
at once. A caller that runs the command group in its own process (a test's CliRunner, a
library user) never goes through `run`, so nothing ends it early.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

_asked = False


def ask() -> None:
    """Let the program end without teardown once the command returns (or exits)."""
    global _asked
    _asked = True


def exit_status(code: object) -> int:
    """The process status `sys.exit(code)` would give; a message goes to stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run(main: Callable[[], object]) -> None:
    """Run a click program; end at once where its command asked for it."""
    try:
        main()
        code: object = None
    except SystemExit as exc:
        if not _asked:
            raise
        code = exc.code
    if not _asked:
        return
    status = exit_status(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said on it
            pass
    os._exit(status)
