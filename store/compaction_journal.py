"""The old set of a day's segments or the new one, never both: a note per merge.

A merge places its output and then moves its inputs to `.trash/`, two steps a reader may
list between, and a process killed between them leaves both in the day folder: every row
would be read twice. So before placing its output, the merge writes a note in the day
folder, `.replacing-<output>.json`, naming the inputs it replaces, and removes it once
they are gone. A reader that lists the note with its output present leaves the inputs
out; with the output absent (not placed yet, or never, the merge having died first), it
ignores the note. The next compaction finishes what a killed one began: it moves the
inputs of a placed output to the trash, and drops notes whose output never came.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from store.durable import fsync_dir, place, temporary_for

PREFIX = ".replacing-"


def _note(folder: Path, output: str) -> Path:
    return folder / f"{PREFIX}{output}.json"


def begin(folder: Path, output: str, inputs: Iterable[Path]) -> None:
    """Note durably that `output`, once placed, replaces `inputs` (all in `folder`)."""
    note = _note(folder, output)
    temporary = temporary_for(note)
    temporary.write_text(json.dumps(sorted(p.name for p in inputs)))
    place(temporary, note)


def end(folder: Path, output: str) -> None:
    """The inputs are gone: the note has no more to say."""
    _note(folder, output).unlink(missing_ok=True)
    fsync_dir(folder)


def _inputs(note: Path) -> list[str]:
    try:
        return list(json.loads(note.read_text()))
    except FileNotFoundError:  # ended meanwhile: its inputs are gone too
        return []


def is_note(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith(".json")


def replaced(folder: Path, names: Iterable[str]) -> set[str]:
    """Of a day folder's entry `names` as listed, those a placed merge output replaces."""
    names = list(names)
    present = set(names)
    hidden: set[str] = set()
    for name in names:
        if is_note(name) and name.removeprefix(PREFIX).removesuffix(".json") in present:
            hidden.update(_inputs(folder / name))
    return hidden


def recover(folder: Path, discard: Callable[[list[Path]], None]) -> None:
    """Finish the merges a killed compaction left between placing and discarding."""
    for name in os.listdir(folder):
        if not is_note(name):
            continue
        output = name.removeprefix(PREFIX).removesuffix(".json")
        if (folder / output).exists():
            discard([p for n in _inputs(folder / name) if (p := folder / n).exists()])
        end(folder, output)


def without_replaced(paths: list[Path]) -> list[Path]:
    """`paths` (entries of day folders) less the inputs of placed merge outputs."""
    if not any(is_note(p.name) for p in paths):
        return paths
    by_folder: dict[Path, list[str]] = {}
    for path in paths:
        by_folder.setdefault(path.parent, []).append(path.name)
    hidden = {folder / n for folder, names in by_folder.items() for n in replaced(folder, names)}
    return [p for p in paths if p not in hidden]
