"""Background compaction while the collector runs.

The collector writes one small segment per group commit; left alone, a day would gather
thousands of them and every reader would open them all. Every `interval` seconds the
compactor merges the days that have gathered `min_segments` segments (the embedded store
only: ClickHouse merges by itself). The global lookup index, which reads every day kept,
is merged again at most every 10 minutes; readers take the day indexes written since
beside it. A failed round is logged and tried again later; a day larger than the memory
compaction has is merged in sorted runs (store/compaction_runs.py), within the budget.
"""

from __future__ import annotations

import logging
import threading

from store.base import SegmentedStore

log = logging.getLogger("dupescope.collect")


class Compactor:
    """A daemon thread calling `store.compact(min_segments)` on a fixed interval."""

    def __init__(
        self,
        store: SegmentedStore,
        interval: float,
        min_segments: int,
        index_every: float = 600.0,
    ) -> None:
        self.store = store
        self.interval = interval
        self.min_segments = min_segments
        self.index_every = index_every
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="compactor", daemon=True)

    def start(self) -> Compactor:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                replaced = self.store.compact(
                    min_segments=self.min_segments, index_every=self.index_every
                )
                if replaced:
                    log.info("compacted %d segment(s)", replaced)
            except Exception:  # a sink's error is logged, never raised into the loop
                if self._stop.is_set():  # interrupted by `stop`
                    log.info("compaction stopped for shutdown; the next one resumes it")
                    break
                log.exception("compaction failed; will try again")
            self.rounds += 1

    def stop(self) -> None:
        """Stop, interrupting a merge under way rather than waiting for it (it may take
        many seconds); what it had not placed yet is merged by the next compaction."""
        self._stop.set()
        self.store.interrupt_compaction()
        self._thread.join(timeout=60)
