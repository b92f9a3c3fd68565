"""--since/--until: RFC 3339 times and spans before now; anything else is a usage error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from click.testing import CliRunner
from forensics_cases import run

from dupescope.cli import main
from dupescope.options import parse_time
from queries.duplicates_table import micros
from store.embedded import EmbeddedStore

KEY = {"idempotency_key": "inv-1"}
NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path, make_table) -> str:
    """One duplicate on 2025-11-30 (long before now)."""
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:41", "ack")], **KEY)
    folder = tmp_path / "store"
    EmbeddedStore(folder).write(make_table(events))
    return str(folder)


@pytest.mark.parametrize("value", ["9999-12-31", "0001-01-01", "2262-04-12", "-1", "soon", "1y"])
@pytest.mark.parametrize("option", ["--since", "--until"])
def test_a_time_out_of_range_or_not_a_time_is_a_usage_error(store, option, value) -> None:
    result = CliRunner().invoke(main, ["duplicates", "--store", store, option, value])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # not an exception escaping click
    assert f"Invalid value for '{option}'" in result.output
    assert repr(value) in result.output
    assert "Accepted:" in result.output and "7d" in result.output


@pytest.mark.parametrize("command", ["alerts", "stats", "lint"])
def test_every_filtered_command_checks_its_times(store, command) -> None:
    result = CliRunner().invoke(main, [command, "--store", store, "--since", "9999-12-31"])
    assert result.exit_code == 2, result.output
    assert "out of range" in result.output


def test_a_span_means_that_long_before_now() -> None:
    assert parse_time("30m", NOW) == NOW - timedelta(minutes=30)
    assert parse_time("1h", NOW) == NOW - timedelta(hours=1)
    assert parse_time("7d", NOW) == NOW - timedelta(days=7)
    assert parse_time("2w", NOW) == NOW - timedelta(weeks=2)
    assert parse_time("now", NOW) == NOW


def test_times_without_a_zone_are_utc_and_offsets_are_converted() -> None:
    assert parse_time("2025-11-30") == datetime(2025, 11, 30, tzinfo=UTC)
    assert parse_time("2025-11-30T12:00:00Z") == datetime(2025, 11, 30, 12, tzinfo=UTC)
    assert parse_time("2025-11-30T14:00:00+02:00") == datetime(2025, 11, 30, 12, tzinfo=UTC)


def test_relative_times_filter_the_cli_answer(store) -> None:
    def keys(*args: str) -> list[str]:
        result = CliRunner().invoke(main, ["duplicates", "--store", store, "--format", "json",
                                           *args])
        assert result.exit_code == 0, result.output
        return [row["key"] for row in orjson.loads(result.output)]

    assert keys("--since", "1h") == []
    assert keys("--until", "1h") == ["inv-1"]
    assert keys("--since", "100000d") == ["inv-1"]


@pytest.mark.parametrize("moment", [
    datetime(2025, 11, 30, 12, 0, 1, 123456),
    datetime(2025, 11, 30, 14, 0, 1, 123456, tzinfo=timezone(timedelta(hours=2))),
    datetime(1960, 1, 1, 0, 0, 0, 1),
], ids=["naive", "offset", "before-1970"])
def test_a_time_the_command_parsed_binds_as_its_spelling_would(moment: datetime) -> None:
    spelled = moment.isoformat() if moment.tzinfo else moment.isoformat() + "Z"
    assert micros(moment) == micros(spelled)
