"""A chDB store's derivation, killed with SIGKILL at its N-th statement (chDB serves one
folder per process, so each step runs in a process of its own).

`python derive_crash_child_chdb.py --serve` imports once, then for each line read on stdin
forks a process that runs one step, and answers with a line `STATUS ANSWER`
(tests/support/fork_server.py). A fresh interpreter spent about 1.5 s importing before its
step began; a fork starts with no chDB session open yet.

    prepare FOLDER    # derived, then a batch not yet
    derive FOLDER N   # killed at statement N (N < 0: never; answers how many it ran)
    check FOLDER      # answers "same" when the state, brought up to date, equals a
                      # build from nothing
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.derived_rows import state  # noqa: E402
from support.fork_server import serve  # noqa: E402

import sample_data  # noqa: E402
from collectors.files import ingest_files  # noqa: E402
from collectors.normalise import Normaliser  # noqa: E402
from queries import derived  # noqa: E402
from store.clickhouse import ChdbStore  # noqa: E402


def prepare(folder: Path) -> None:
    lines = sample_data.generate(seed=3, target_events=600, hours=0.25).jsonl_bytes()
    parts = lines.splitlines()
    half = len(parts) // 2
    store = ChdbStore(str(folder / "chdb"))
    for n, batch in enumerate((parts[:half], parts[half:])):
        path = folder / f"batch-{n}.jsonl"
        path.write_bytes(b"\n".join(batch) + b"\n")
        ingest_files([str(path)], store, Normaliser())
        if n == 0:
            derived.ensure(store)
    store.close()


def derive(folder: Path, kill_at: int) -> str:
    store = ChdbStore(str(folder / "chdb"))
    ran = 0
    real = store.command

    def command_or_die(sql: str, params: dict[str, Any] | None = None) -> None:
        nonlocal ran
        if ran == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        real(sql, params)
        ran += 1

    store.command = command_or_die  # type: ignore[method-assign]
    derived.ensure(store)
    return str(ran)


def check(folder: Path) -> str:
    live = ChdbStore(str(folder / "chdb"))
    fresh = ChdbStore(str(folder / "chdb"), database="from_nothing")
    fresh.write(live.arrow("SELECT * FROM events"))
    return "same" if state(live) == state(fresh) else "different"


def step(words: list[str]) -> str:
    """One step, by its request line's words; what it answers."""
    mode, where = words[0], Path(words[1])
    if mode == "prepare":
        prepare(where)
        return "prepared"
    if mode == "derive":
        return derive(where, int(words[2]))
    return check(where)


if __name__ == "__main__":
    serve(step)
