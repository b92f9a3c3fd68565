"""What ingest and the tail ask of a worker-log reader, and what most readers share.

A worker log's later lines end runs that earlier lines began, so a reader keeps state
across a file: the tail saves it before a chunk (`checkpoint`) and puts it back when the
chunk must be read again (`restore`), and a reader resumed in the middle of a log first
learns what the lines before said (`prime`). A log still being written is read with
`decode_growing`, which may stop early where a line cannot be judged until later ones come
(Celery's); the others read every line at once.
"""

from __future__ import annotations

import copy
from typing import Generic, TypeVar

from collectors.jsonlines import Decoded

StateT = TypeVar("StateT")


class WorkerLogReader(Generic[StateT]):
    """A reader of one worker log; subclasses set `state` and implement `decode`."""

    state: StateT

    def decode(self, block: bytes, first_line: int, source: str) -> Decoded:
        """Rows of the lines in `block` (numbered from `first_line`), in line order."""
        raise NotImplementedError

    def checkpoint(self) -> StateT:
        return copy.deepcopy(self.state)

    def restore(self, state: StateT) -> None:
        self.state = state

    def prime(self, block: bytes) -> None:
        """Learn what lines read before said (the runs still open), storing nothing."""
        self.decode(block, 1, "")

    def decode_growing(
        self, block: bytes, first_line: int, source: str, now: float | None = None
    ) -> tuple[Decoded, int]:
        """For a log still being written (a tail): the rows, and how many bytes of `block`
        were read; here every line is read at once."""
        del now
        return self.decode(block, first_line, source), len(block)
