"""A chunked first read of the Collector's tables, killed with SIGKILL after N chunks
(chDB serves one folder per process, so the read runs in a process of its own); with
`between`, killed in chunk N between its insert into `events` and the id index's fill.

    python otel_chunk_kill_child.py FOLDER N [between]
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store import otel_index  # noqa: E402
from store.otel import OtelChdbStore, OtelSource  # noqa: E402
from store.otel_progress import ReadProgress  # noqa: E402


def main(folder: str, after: int, between: bool = False) -> None:
    store = OtelChdbStore(folder, OtelSource("otel"))
    store.chunk_rows = 250
    if between:
        fills = 0

        def fill(command: object, own: str) -> None:
            nonlocal fills
            fills += 1
            if fills >= after:
                os.kill(os.getpid(), signal.SIGKILL)

        otel_index.fill = fill  # type: ignore[assignment]

    def kill(progress: ReadProgress) -> None:
        if progress.chunks_read >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    store.progress.follow(kill)
    store.refresh()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["between"])
