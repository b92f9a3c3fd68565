"""Where a read of the exporter's tables stands, for the CLI and for `/metrics`.

A first read of a large table takes minutes: a person watching it wants the day being
read, how much is left and how fast it goes, and a scraper the same as numbers. The store
reports each chunk here (store/followed.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from store.followed import Followed


@dataclass
class ReadProgress:
    """One read of the exporter's tables (a first read, or a refresh), chunk by chunk."""

    rows_total: int = 0
    rows_read: int = 0
    chunks_total: int = 0
    chunks_read: int = 0
    #: The partition (day) of the chunk read last: the read goes newest day first.
    partition: str = ""
    started: float = field(default_factory=time.monotonic)
    finished: bool = False
    #: Where a read of the recent rows first began (ISO 8601), its backlog left unread.
    recent_from: str = ""

    def rate(self) -> float:
        """Rows a second so far."""
        elapsed = time.monotonic() - self.started
        return self.rows_read / elapsed if elapsed > 0 else 0.0

    def describe(self) -> str:
        if self.recent_from:
            return (f"read the Collector's tables from {self.recent_from} on first (newest "
                    f"day {self.partition}); the {self.rows_total:,} rows of the backlog are "
                    "read whole by the next refresh: until then a key is judged by its rows "
                    "from then on")
        share = 100.0 * self.rows_read / self.rows_total if self.rows_total else 100.0
        where = f"day {self.partition}, " if self.partition else ""
        state = "read" if self.finished else "reading"
        return (f"{state} the Collector's tables: {where}chunk {self.chunks_read} of "
                f"{self.chunks_total}, {self.rows_read:,} of {self.rows_total:,} rows "
                f"({share:.0f}%), {self.rate():,.0f} rows/s")


Listener = Callable[[ReadProgress], None]


class Progress(Followed[ReadProgress]):
    """The listeners of a store's reads, and the last state they were told."""
