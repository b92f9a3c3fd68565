"""How often each failure mode is injected on top of clean traffic."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Rates:
    """Fault rates. With every rate at 0 the model produces no duplicate at all."""

    # share of direct enqueues whose publish call times out and is retried
    producer_retry: float = 0.02
    # share of deliveries whose visibility extension stalls while the job outlives it
    visibility_timeout: float = 0.006
    # share of executions whose worker is killed (mostly after the effect, before the ack);
    # a crash-looping release multiplies it while it is deployed
    worker_crash: float = 0.004
    # share of acks the broker loses, delivering the job again later
    broker_redelivery: float = 0.004
    # share of executions that hit a transient error and are nacked for a retry
    retry_after_failure: float = 0.015
    # cache stampedes per hour of traffic
    cache_stampede: float = 1.5
    # share of locked executions whose lock heartbeat stalls so the lock expires mid-run
    lock_expiry: float = 0.012
    # share of those lock expiries that another owner walks into (overlapped)
    overlap: float = 0.5
    # share of worker hosts whose clock is off by more than the skew tolerance
    clock_skew: float = 0.16
    # share of lock acquisitions followed by a lock store failover that forgets them
    split_brain: float = 0.004

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def with_(self, **changes: float) -> Rates:
        unknown = set(changes) - set(self.names())
        if unknown:
            raise TypeError(f"unknown rate(s): {sorted(unknown)}; known: {self.names()}")
        return replace(self, **changes)

    @classmethod
    def off(cls) -> Rates:
        """Clean traffic: every fault disabled."""
        return cls(**{name: 0.0 for name in cls.names()})
