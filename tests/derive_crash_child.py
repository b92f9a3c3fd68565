"""Derivations of embedded stores, each killed with SIGKILL as it places its N-th file.

`python derive_crash_child.py --serve` imports once, then for each line `STORE N` read on
stdin (N < 0: never killed) forks a process that brings the store's derived state up to
date, and answers with a line `STATUS PLACED...`: the process's exit status (minus the
signal that killed it) and the names of the files it placed, in order (none when it did
not live to say; tests/support/fork_server.py). A fresh interpreter a kill point spent
0.75 s importing before it derived anything.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.fork_server import serve  # noqa: E402

from derive.embedded import state as derived_state  # noqa: E402
from queries import derived, lock_overruns  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402


def derive(folder: str, kill_at: int) -> list[str]:
    """The names of the files placed by a derivation of `folder` that is killed as it
    places its `kill_at`-th (and kept answers computed and kept too)."""
    placed: list[str] = []
    real_place = derived_state.place

    def place_or_die(temporary: Path, final: Path) -> None:
        if len(placed) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        real_place(temporary, final)
        placed.append(final.name)

    derived_state.place = place_or_die
    try:
        store = EmbeddedStore(folder)
        derived.ensure(store)
        lock_overruns(store)  # a kept answer computed and kept too
    finally:
        derived_state.place = real_place
    return placed


if __name__ == "__main__":
    serve(lambda words: " ".join(derive(words[0], int(words[1]))))
