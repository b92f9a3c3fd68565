"""Timestamps: RFC 3339 with any offset, or epoch numbers whose unit is read from size."""

import polars as pl
import pytest

from collectors.timestamps import TimestampError, micros_to_rfc3339, to_micros
from collectors.timestamps_vec import _fixed_width, micros_column

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


FIXED_FORMS = [
    "2025-11-30T12:00:00Z",
    "2025-11-30T12:00:00.5Z",
    "2024-02-29T23:59:59.123456789Z",
    "0001-01-01T00:00:00.000001Z",
    "9999-12-31T23:59:59.999999-23:59",
    "1969-12-31T23:59:59.25+05:30",
    "2025-11-30T12:00:00-00:00",
]


def test_fixed_width_timestamps_read_as_the_row_path_reads_them() -> None:
    # Each form twice, so every width holds more than one row.
    values = pl.Series("ts", FIXED_FORMS * 2)
    assert _fixed_width(values) is not None
    assert micros_column(values).to_list() == [to_micros(v) for v in FIXED_FORMS * 2]


@pytest.mark.parametrize(
    "odd",
    [
        "2025-02-29T12:00:00Z",  # not a leap year
        "2025-04-31T12:00:00Z",
        "2025-11-30T24:00:00Z",
        "2025-11-30T12:00:60Z",  # a leap second: the row path refuses it
        "0000-11-30T12:00:00Z",
        "2025-11-30T12:00:00+24:00",
        "2025-11-30 12:00:00Z",
        "2025-11-30T12:00:00.Z",
    ],
)
def test_one_odd_timestamp_leaves_the_column_to_the_general_path(odd: str) -> None:
    values = pl.Series("ts", ["2025-11-30T12:00:00Z", odd, "2025-11-30T12:00:01Z"])
    assert _fixed_width(values) is None
    got = micros_column(values).to_list()
    assert got[0] == to_micros("2025-11-30T12:00:00Z") and got[2] == got[0] + 1_000_000


def test_fixed_width_timestamps_with_gaps_keep_their_gaps() -> None:
    # A field other spellings (`timestamp`, `time`) fill in some rows.
    values = pl.Series("ts", [FIXED_FORMS[0], None, FIXED_FORMS[2], None, FIXED_FORMS[0]])
    assert micros_column(values).to_list() == [
        None if v is None else to_micros(v) for v in values.to_list()
    ]


def test_epochs_as_text_are_read_as_the_numbers_they_spell() -> None:
    # How polars reads a column where a log writes some timestamps as numbers, some as text.
    texts = [
        "1764504000",
        "1764504000.25",
        "1764504000.1234565",
        "1764504000123",
        "1764504000123.5",
        "1764504000123456",
        "1764504000123456789",
        "2025-11-30T12:00:00+02:00",
    ]
    got = micros_column(pl.Series("ts", texts)).to_list()
    assert got == [to_micros(t) for t in texts]


@pytest.mark.parametrize("odd", ["99999999999999999999", "1.7e9", "-5", "12.", ".5"])
def test_epoch_text_the_column_path_is_unsure_of_is_left_to_the_row_path(odd: str) -> None:
    assert micros_column(pl.Series("ts", [odd])).to_list() == [None]


def test_a_column_of_epochs_rfc3339_and_gaps_is_read_kind_by_kind() -> None:
    texts = ["1764504000", None, "2025-11-30T12:00:00Z", "1764504000.5"]
    texts += ["2025-11-30T14:00:00.25+02:00"]
    got = micros_column(pl.Series("ts", texts)).to_list()
    assert got == [None if t is None else to_micros(t) for t in texts]
