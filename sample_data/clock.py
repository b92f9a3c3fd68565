"""Time in the model: integer microseconds since the run's epoch, rendered as RFC 3339."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Traffic starts here; the fast mode shifts copies by whole hours from it.
EPOCH = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
EPOCH_US = int(EPOCH.timestamp()) * 1_000_000

MS = 1_000
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

# Offsets of well-synced hosts stay within this; skewed hosts are set well beyond it.
SYNCED_MS = 4.0
# Clock skew above this is a finding; the truth lists the workers beyond it.
SKEW_TOLERANCE_MS = 50.0
# Largest offset the model gives any host. Orderings that a cause depends on are kept at
# least MARGIN apart in true time so that skew cannot flip them.
MAX_OFFSET_MS = 200.0
MARGIN = 1 * SECOND


def rfc3339(us_since_epoch: int) -> str:
    """`2026-11-30T10:00:00.123456Z` for a model time (µs since EPOCH)."""
    dt = EPOCH + timedelta(microseconds=us_since_epoch)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unix_ns(us_since_epoch: int) -> int:
    """Nanoseconds since the Unix epoch, for OpenTelemetry timestamps."""
    return (EPOCH_US + us_since_epoch) * 1_000
