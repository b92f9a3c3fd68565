"""When and how often to send: drains the outbox into sinks with backoff and jitter.

Sinks only make attempts; this decides retries, so every sink gets the same policy. A
delivery is marked done only after its sink accepted it, so a crash in between repeats
the delivery rather than losing it, and the repeat carries the same Idempotency-Key.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from alerts.faults import crash_point
from alerts.metrics import AlertMetrics
from alerts.sinks import SendResult, Sink
from alerts.state_base import AlertState, Delivery

log = logging.getLogger("dupescope.alerts")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: the n-th retry waits between d/2 and d, where
    d = min(cap_s, base_s * 2**(n-1)); the jitter keeps many watchers from retrying a
    recovering receiver in lockstep."""

    attempts_per_pass: int = 3
    max_attempts: int = 10
    base_s: float = 0.5
    cap_s: float = 60.0

    @classmethod
    def from_settings(
        cls,
        *,
        max_attempts: int | None = None,
        base_s: float | None = None,
        cap_s: float | None = None,
        attempts_per_pass: int | None = None,
    ) -> RetryPolicy:
        """Arguments first, then DUPESCOPE_ALERT_* environment variables, then defaults."""
        default = cls()

        def pick(value: float | None, env: str, fallback: float) -> float:
            if value is not None:
                return value
            text = os.environ.get(env)
            if text is None:
                return fallback
            try:
                return float(text)
            except ValueError as exc:
                raise ValueError(f"{env} must be a number, got {text!r}") from exc

        policy = cls(
            attempts_per_pass=int(
                pick(
                    attempts_per_pass,
                    "DUPESCOPE_ALERT_ATTEMPTS_PER_PASS",
                    default.attempts_per_pass,
                )
            ),
            max_attempts=int(
                pick(max_attempts, "DUPESCOPE_ALERT_MAX_ATTEMPTS", default.max_attempts)
            ),
            base_s=pick(base_s, "DUPESCOPE_ALERT_BACKOFF_S", default.base_s),
            cap_s=pick(cap_s, "DUPESCOPE_ALERT_BACKOFF_CAP_S", default.cap_s),
        )
        policy.validate()
        return policy

    def validate(self) -> None:
        if self.attempts_per_pass < 1 or self.max_attempts < 1:
            raise ValueError("delivery attempts must be at least 1")
        if self.base_s < 0 or self.cap_s < self.base_s:
            raise ValueError("backoff needs 0 <= base_s <= cap_s")

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        ceiling = min(self.cap_s, self.base_s * 2 ** max(retry - 1, 0))
        return ceiling / 2 + rand() * ceiling / 2


class Dispatcher:
    """Sends due outbox rows to their sinks; errors are logged and counted, never raised."""

    def __init__(
        self,
        state: AlertState,
        sinks: list[Sink],
        *,
        policy: RetryPolicy | None = None,
        metrics: AlertMetrics | None = None,
        clock: Callable[[], datetime] = utcnow,
        stop: threading.Event | None = None,
    ) -> None:
        self.state = state
        self.sinks = {sink.id: sink for sink in sinks}
        self.policy = policy or RetryPolicy()
        self.metrics = metrics or AlertMetrics()
        self.clock = clock
        self.stop = stop or threading.Event()
        self._orphans: set[str] | None = None  # told once, at the first flush

    def flush(self) -> int:
        """Attempt every due delivery; returns how many were accepted in this pass."""
        accepted = 0
        if self._orphans is None:
            # Queued for a webhook this `watch` was not given: kept for one that is.
            self._orphans = set(self.state.pending_sinks()) - set(self.sinks)
            for orphan in sorted(self._orphans):
                log.warning("outbox has deliveries for %s, not configured", orphan)
        for delivery in self.state.due(self.clock(), list(self.sinks)):
            if self.stop.is_set():
                break
            accepted += self._deliver(self.sinks[delivery.sink], delivery)
        self.metrics.pending.set(self.state.pending_count())
        return accepted

    def _attempt(self, sink: Sink, delivery: Delivery) -> SendResult:
        try:
            return sink.send(delivery.alert_id, delivery.document)
        except Exception as exc:  # a sink must not take the loop down with it
            log.exception("sink %s raised", sink.label)
            return SendResult(ok=False, retryable=True, detail=f"{type(exc).__name__}: {exc}")

    def _deliver(self, sink: Sink, delivery: Delivery) -> int:
        attempts = delivery.attempts
        for tried in range(1, self.policy.attempts_per_pass + 1):
            attempts += 1
            result = self._attempt(sink, delivery)
            if result.ok:
                crash_point("after_send")
                self.state.delivered(delivery, attempts, self.clock())
                self.metrics.deliveries.labels(sink.label, delivery.document["rule"]).inc()
                return 1
            self.metrics.failures.labels(sink.label, str(result.retryable).lower()).inc()
            log.warning(
                "alert %s to %s: attempt %d failed (%s)",
                delivery.alert_id,
                sink.label,
                attempts,
                result.detail,
            )
            if not result.retryable or attempts >= self.policy.max_attempts:
                self.state.give_up(delivery, attempts, result.detail, self.clock())
                self.metrics.abandoned.labels(sink.label).inc()
                log.error("alert %s to %s: giving up", delivery.alert_id, sink.label)
                return 0
            wait = self.policy.delay(attempts)
            if tried == self.policy.attempts_per_pass:
                later = self.clock() + timedelta(seconds=wait)
                self.state.retry_later(delivery, attempts, later, result.detail, self.clock())
                return 0
            if self.stop.wait(wait):
                self.state.retry_later(
                    delivery, attempts, self.clock(), result.detail, self.clock()
                )
                return 0
        return 0
