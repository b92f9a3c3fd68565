"""Timestamps: RFC 3339 with any offset, or epoch numbers whose unit is read from size."""

import pytest

from collectors.timestamps import TimestampError, micros_to_rfc3339, to_micros

NOON_UTC = 1_764_504_000_000_000  # 2025-11-30T12:00:00Z in microseconds


def test_rfc3339_with_z() -> None:
    assert to_micros("2025-11-30T12:00:00Z") == NOON_UTC


def test_rfc3339_with_offset_is_converted_to_utc() -> None:
    assert to_micros("2025-11-30T14:00:00+02:00") == NOON_UTC


def test_rfc3339_fraction_of_any_length() -> None:
    assert to_micros("2025-11-30T12:00:00.5Z") == NOON_UTC + 500_000
    assert to_micros("2025-11-30T12:00:00.123456789Z") == NOON_UTC + 123_456


def test_rfc3339_without_offset_means_utc() -> None:
    assert to_micros("2025-11-30 12:00:00") == NOON_UTC


@pytest.mark.parametrize(
    ("value", "unit"),
    [
        (1_764_504_000, "seconds"),
        (1_764_504_000_000, "milliseconds"),
        (1_764_504_000_000_000, "microseconds"),
        (1_764_504_000_000_000_000, "nanoseconds"),
    ],
)
def test_epoch_unit_is_decided_by_magnitude(value: int, unit: str) -> None:
    assert to_micros(value) == NOON_UTC, unit


def test_epoch_seconds_with_fraction() -> None:
    assert to_micros(1_764_504_000.25) == NOON_UTC + 250_000


def test_epoch_as_digit_string() -> None:
    assert to_micros("1764504000000") == NOON_UTC


@pytest.mark.parametrize("bad", ["yesterday", "", True, None, "2025-13-40T00:00:00Z"])
def test_not_a_timestamp_is_refused(bad: object) -> None:
    with pytest.raises(TimestampError):
        to_micros(bad)


def test_round_trip_to_rfc3339() -> None:
    assert micros_to_rfc3339(NOON_UTC + 7) == "2025-11-30T12:00:00.000007Z"
