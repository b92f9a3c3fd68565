"""Brings an embedded store's derived state up to date, killed with SIGKILL as it places
its N-th file (`python derive_crash_child.py STORE N`; N < 0: never). Prints how many
files it placed when it lives to the end."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queries import derived, lock_overruns  # noqa: E402
from store import derived_state  # noqa: E402
from store.embedded import EmbeddedStore  # noqa: E402

placed = 0
real_place = derived_state.place


def place_or_die(temporary: Path, final: Path) -> None:
    global placed
    if placed == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
    real_place(temporary, final)
    placed += 1


derived_state.place = place_or_die
store = EmbeddedStore(sys.argv[1])
derived.ensure(store)
lock_overruns(store)  # a kept answer computed and kept too
print(placed)
