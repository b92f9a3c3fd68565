"""The `watch` loop: evaluate as data arrives, record new incidents, drain the outbox.

Evaluation is incremental in event time: the state keeps a watermark (the newest event
time evaluated), and each round considers incidents whose event time is no older than
the watermark minus the allowed lateness, so late events inside that bound still raise
alerts while old history is not re-examined forever. A first round (no watermark kept
yet) takes the same window behind the newest event, so starting `watch` on a store that
already holds weeks of history pages about what is happening now, not about every
incident of those weeks (`history=True` alerts on all of them); over the Collector's
tables never read, that window is read first and the backlog by the next round. Nothing
is re-evaluated while the store's content is unchanged, and on an embedded store a round
after the first asks the per-key rules about the keys batches touched since the last round
only (`queries.derived.touched_since`). Exactly-once firing comes from the alert ids and the
state, not from the watermark: the same incident found again is simply already known.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from alerts.delivery import Dispatcher, utcnow
from alerts.engine import evaluate
from alerts.faults import crash_point
from alerts.metrics import AlertMetrics
from alerts.model import Alert
from alerts.rules import Rule
from alerts.sinks import Sink
from alerts.state_base import AlertState
from queries.derived import Mark, query, touched_since
from queries.loader import run
from store.base import Store

log = logging.getLogger("dupescope.alerts")


def content_version(store: Store) -> str:
    """Changes when the store's events change; cheap, so it can run every interval."""
    snapshot = store.snapshot_id()
    if snapshot is not None:
        return snapshot
    row = run(store, "events_version").iloc[0]
    return f"{row['n']}:{row['last']}"


def newest_event(store: Store) -> datetime | None:
    """The newest event time, from the store summary kept with the derived tables (a
    pass over every event cost most of a second at 10M events, every round)."""
    value = query(store, "store_summary")["last_ts"].iloc[0]
    if value is None or pd.isna(value):
        return None
    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.to_pydatetime()


@dataclass
class Watcher:
    store: Store
    rules: dict[str, Rule]
    state: AlertState
    sinks: list[Sink]
    dispatcher: Dispatcher
    metrics: AlertMetrics
    lateness: timedelta = timedelta(minutes=15)
    clock: Callable[[], datetime] = utcnow
    history: bool = False  # whether a first round alerts on every incident already kept

    def __post_init__(self) -> None:
        self._seen_version: str | None = None
        self._seen_mark: Mark | None = None  # where the derived state was last evaluated
        self._flushed = False  # whether this tick's evaluation passed over the outbox

    def evaluate(self) -> list[Alert]:
        """One incremental evaluation; returns the incidents fired for the first time.

        Rule by rule, in the rules' order: each rule's new incidents are recorded and
        delivered before the next rule runs, so an alert about the keys a batch touched
        (a lock that expired under its holder) does not wait for the rules that judge a
        job type's whole history."""
        window_first = self._read_window_first()
        version = content_version(self.store)
        if version == self._seen_version:
            return []
        started = time.perf_counter()
        watermark = self.state.watermark()
        since = watermark - self.lateness if watermark else self._first_since()
        mark, touched = touched_since(self.store, self._seen_mark)
        new: list[Alert] = []
        for name, rule in self.rules.items():
            found = evaluate(self.store, {name: rule}, incidents_since=since, touched=touched)
            fired = self.state.record(found, [s.id for s in self.sinks], self.clock())
            crash_point("after_outbox")
            for alert in fired:
                self.metrics.fired(alert)
                log.info("alert %s %s %s: %s", alert.id, alert.severity, alert.rule,
                         alert.summary)
            if fired:
                self.dispatcher.flush()
                self._flushed = True
            new += fired
        newest = self._newest()
        if newest is not None and (watermark is None or newest > watermark):
            self.state.set_watermark(newest)
            watermark = newest
        if watermark is not None:
            self.metrics.watermark.set(watermark.timestamp())
            self.metrics.lag.set(max((self.clock() - watermark).total_seconds(), 0.0))
        self.metrics.evaluations.inc()
        self.metrics.evaluation_seconds.observe(time.perf_counter() - started)
        self._seen_version = version
        self._seen_mark = mark
        if window_first:
            self._read_newest_first(None)  # the rest of the backlog, next round
        return new

    def _read_window_first(self) -> bool:
        """Before a first round (no watermark kept, not `history`), let a store over the
        Collector's tables read the window it looks at first (store/otel.py
        `read_newest_first`): on a table never read, the first alerts then come in
        seconds, not after the whole history; whether it was asked to."""
        if self._seen_version is not None or self.history or self.state.watermark():
            return False
        if not self._read_newest_first(self.lateness):
            return False
        log.info("first round on %s: reading the last %s of its tables first; the rest "
                 "of the backlog is read next round", self.store.describe(), self.lateness)
        return True

    def _read_newest_first(self, window: timedelta | None) -> bool:
        read = getattr(self.store, "read_newest_first", None)
        if read is None:
            return False
        read(window)
        return True

    def _newest(self) -> datetime | None:
        newest = newest_event(self.store)
        if newest is None:
            return None
        # A worker whose clock runs ahead must not drag the watermark into the future
        # and push every real incident out of the window.
        return min(newest, self.clock())

    def _first_since(self) -> datetime | None:
        """Where a round without a watermark starts: `lateness` behind the newest event,
        or at the beginning with `history`."""
        newest = None if self.history else self._newest()
        if newest is None:
            # Nothing kept yet: whatever arrives before a watermark is news.
            self.history = True
            return None
        since = newest - self.lateness
        log.warning("first round on %s: alerting on incidents since %s (the newest event "
                    "less the lateness); older ones are history (watch --all-history "
                    "alerts on them too)", self.store.describe(), since.isoformat())
        return since

    def tick(self) -> list[Alert]:
        """Evaluate, then deliver whatever is due (including what a crash left behind)
        unless the evaluation just did: one pass over the outbox a tick, or one a rule
        that fired."""
        self._flushed = False
        try:
            new = self.evaluate()
        except Exception:
            log.exception("evaluation failed on %s; retrying next interval", self.store.describe())
            new = []
        if not self._flushed:
            self.dispatcher.flush()
        return new

    def run(self, interval_s: float, stop: threading.Event) -> None:
        """Tick every `interval_s`, counted from the start of the last tick: a batch that
        arrived during a slow tick (a derivation at 10M events) waited a whole interval
        more after it."""
        while not stop.is_set():
            started = time.monotonic()
            self.tick()
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
        for sink in self.sinks:
            sink.shutdown()
