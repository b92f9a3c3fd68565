"""Timestamps from any source to integer microseconds since the Unix epoch (UTC)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from store.contract import (
    EPOCH_MICROS_BELOW,
    EPOCH_MILLIS_BELOW,
    EPOCH_SECONDS_BELOW,
    MICROS_RANGE,
)

__all__ = ["MICROS_RANGE", "Nanos", "TimestampError", "epoch_to_micros", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Epoch numbers carry no unit; the contract decides it by magnitude.
_SECONDS_BELOW = EPOCH_SECONDS_BELOW
_MILLIS_BELOW = EPOCH_MILLIS_BELOW
_MICROS_BELOW = EPOCH_MICROS_BELOW


class TimestampError(ValueError):
    """A value that is neither RFC 3339 nor an epoch number."""


class Nanos(int):
    """An OTLP time field (`time_unix_nano`): nanoseconds by definition, so its unit is
    never guessed from its magnitude as a bare epoch number's is (1 is 1 ns after 1970)."""


def epoch_to_micros(value: float | int) -> int:
    if isinstance(value, float) and not math.isfinite(value):
        raise TimestampError(f"not a timestamp: {value!r}")
    magnitude = abs(value)
    if magnitude < _SECONDS_BELOW:
        return round(value * 1_000_000)
    if magnitude < _MILLIS_BELOW:
        return round(value * 1_000)
    if magnitude < _MICROS_BELOW:
        return int(value)
    return int(value) // 1_000


def rfc3339_to_micros(text: str) -> int:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TimestampError(f"not an RFC 3339 timestamp: {text!r}") from exc
    if parsed.tzinfo is None:  # no offset: the contract says UTC
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def to_micros(value: object) -> int:
    """Accept RFC 3339 text (any offset) or epoch s/ms/µs/ns as a number or digit string;
    a `Nanos` is nanoseconds. (Whether a row may hold the result is `MICROS_RANGE`.)"""
    if isinstance(value, Nanos):
        return value // 1_000
    if isinstance(value, bool):
        raise TimestampError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        return epoch_to_micros(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise TimestampError("empty timestamp")
        if text[0].isdigit() and ("-" not in text[1:] and ":" not in text):
            try:
                return epoch_to_micros(float(text) if "." in text else int(text))
            except ValueError as exc:
                raise TimestampError(f"not a timestamp: {value!r}") from exc
        return rfc3339_to_micros(text)
    raise TimestampError(f"not a timestamp: {value!r}")


def micros_to_rfc3339(micros: int) -> str:
    seconds, rest = divmod(micros, 1_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{rest:06d}Z"
