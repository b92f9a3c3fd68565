"""Options and helpers shared by every `dupescope` subcommand."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from dupescope.output import FORMATS

if TYPE_CHECKING:
    from queries.derived import BuildProgress
    from store import Store

STORE_ENV = "DUPESCOPE_STORE"
STORE_HELP = (
    "Where events live: a folder (embedded store), clickhouse://user:pass@host:8123/db "
    "or chdb:///path; add ?source=otel to read the OpenTelemetry Collector's ClickHouse "
    "tables in place. Default: the store given before the command, $DUPESCOPE_STORE or "
    "./dupescope-data."
)


def _store_from_group(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A command's own --store wins; else the one given before the command, else the env."""
    if value is not None:
        return value
    root = ctx.find_root()
    if root is not ctx:
        return root.params.get("store_url")  # the group's --store, or DUPESCOPE_STORE
    return os.environ.get(STORE_ENV) or None


def store_option(command):  # type: ignore[no-untyped-def]
    # No envvar here: the environment is read by the group's option, so that
    # `dupescope --store X cmd` wins over DUPESCOPE_STORE as the order of words suggests.
    return click.option(
        "--store", "store_url", callback=_store_from_group, help=STORE_HELP
    )(command)


def group_store_option(command):  # type: ignore[no-untyped-def]
    """--store before the command name (or DUPESCOPE_STORE), for every command after it."""
    return click.option(
        "--store",
        "store_url",
        envvar=STORE_ENV,
        metavar="STORE",
        help="Where events live, for the command that follows (which may also take --store "
        "itself): a folder (embedded store), clickhouse://user:pass@host:8123/db or "
        "chdb:///path (?source=otel: the OpenTelemetry Collector's ClickHouse tables, read "
        "in place). Default: $DUPESCOPE_STORE or ./dupescope-data.",
    )(command)


def store_given_on_command_line(ctx: click.Context) -> str | None:
    """The group's --store only if typed (not from the env): for commands that create a
    store of their own kind and must not write into whatever DUPESCOPE_STORE names."""
    root = ctx.find_root()
    if root is ctx or root.get_parameter_source("store_url") is not ParameterSource.COMMANDLINE:
        return None
    return root.params.get("store_url")


def format_option(command):  # type: ignore[no-untyped-def]
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True
    )(command)


def rules_option(command):  # type: ignore[no-untyped-def]
    """--rules: the alert rules `alerts` evaluates once and `watch` fires on."""
    return click.option(
        "--rules",
        "rules_path",
        type=click.Path(exists=True, dir_okay=False),
        envvar="DUPESCOPE_ALERT_RULES",
        help="TOML rules file laid over the defaults (see alerts/default_rules.toml).",
    )(command)


def mapping_option(command):  # type: ignore[no-untyped-def]
    """--mapping: the field names of the events a loader reads (`ingest`, `collect`)."""
    return click.option(
        "--mapping",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="TOML file naming your fields for the canonical ones.",
    )(command)


def field_mapping_or_exit(path: str | None):  # type: ignore[no-untyped-def]
    """The --mapping file's FieldMapping (the built-in one without it), or its error in words."""
    from collectors.mapping import DEFAULT_MAPPING, FieldMapping, MappingError

    try:
        return FieldMapping.load(path) if path else DEFAULT_MAPPING
    except MappingError as exc:
        raise click.ClickException(str(exc)) from exc


#: Streamlit's own default port.
DASHBOARD_PORT = 8501


def port_option(command):  # type: ignore[no-untyped-def]
    """--port: where the dashboard serves (`dashboard`, and `demo` which starts it)."""
    return click.option(
        "--port", type=click.IntRange(1, 65535), default=DASHBOARD_PORT, show_default=True
    )(command)


def no_browser_option(command):  # type: ignore[no-untyped-def]
    """--no-browser (alias --headless): serve the dashboard without opening a window."""
    return click.option(
        "--no-browser",
        "--headless",
        "no_browser",
        is_flag=True,
        help="Do not open a browser (servers, containers, CI).",
    )(command)


def open_store_or_exit(url: str | None, *, existing: bool = False, writable: bool = False,  # type: ignore[no-untyped-def]
                       since: datetime | None = None):
    """Open the store; a query needs one that `existing`, a loader one that is `writable`.

    A mistyped folder must not read as an empty store ("no duplicates" for a typo), and a
    folder that cannot be written must fail before any work, with a sentence, not a traceback.
    A question about executions `since` a time lets a store over the Collector's tables
    with a large backlog read that window first (store/otel.py `read_recent_first`).
    """
    from store import StoreError, open_store

    try:
        store = open_store(url, existing=existing, writable=writable)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc
    _show_reads(store)
    if not writable:  # a question: it may wait for a build of the derived tables
        _show_builds(store)
    read_recent_first = getattr(store, "read_recent_first", None)
    if since is not None and read_recent_first is not None:
        read_recent_first(since)
    return store


def _show_reads(store: object) -> None:
    """A read of the Collector's tables takes minutes the first time: say on stderr where
    it stands after each chunk (store/otel_progress.py)."""
    from store.otel_progress import Progress

    progress = getattr(store, "progress", None)
    if isinstance(progress, Progress):
        progress.follow(lambda p: click.echo(p.describe(), err=True))


#: Seconds a build of the derived tables from nothing runs before the CLI says where it
#: stands, and between two such lines: a small store's build says nothing.
BUILD_NOTE_SECONDS = 10.0


def _show_builds(store: Store) -> None:
    """A build of the derived tables from nothing takes minutes on a large store (after a
    first read of the Collector's tables, a first question over a large load): name its
    step on stderr now and then (derive/progress.py)."""
    from queries.derived import builds

    builds(store).follow(BuildLines())


class BuildLines:
    """A build's steps as lines on stderr, one at a step's start once BUILD_NOTE_SECONDS
    passed since the build began or since the last line, and the build's end where a
    line was said."""

    def __init__(self) -> None:
        self.said_at: float | None = None

    def __call__(self, progress: BuildProgress) -> None:
        now = time.monotonic()
        if progress.finished:
            if self.said_at is not None:
                click.echo(progress.describe(), err=True)
            self.said_at = None
        elif now - (self.said_at or progress.started) >= BUILD_NOTE_SECONDS:
            click.echo(progress.describe(), err=True)
            self.said_at = now


# ---- times --------------------------------------------------------------------------

#: "30m", "1h", "7d": that long before now.
RELATIVE = re.compile(r"^(\d{1,9})\s*(s|m|h|d|w)$")
RELATIVE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: The range the query library can represent (nanoseconds in 64 bits, as pandas holds them).
EARLIEST = datetime(1677, 9, 22, tzinfo=UTC)
LATEST = datetime(2262, 4, 11, tzinfo=UTC)
TIME_FORMS = (
    "RFC 3339 / ISO 8601 (2025-11-30, 2025-11-30T12:00:00Z, 2025-11-30 12:00+02:00; no "
    "zone means UTC), 'now', or a span before now such as 30m, 1h, 7d, 2w (s, m, h, d, w)"
)


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """A --since/--until value as an aware UTC datetime; ValueError says what is wrong."""
    value = text.strip()
    now = now or datetime.now(UTC)
    relative = RELATIVE.match(value.lower())
    if value.lower() == "now":
        moment = now
    elif relative:
        amount, unit = relative.groups()
        try:
            moment = now - timedelta(**{RELATIVE_UNITS[unit]: int(amount)})
        except OverflowError:
            raise ValueError("that is further back than can be represented") from None
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("not a time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
            moment = datetime.min.replace(tzinfo=UTC)
    if not EARLIEST <= moment <= LATEST:
        raise ValueError(
            f"out of range: times from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} are accepted"
        )
    return moment


class TimeParam(click.ParamType):
    """--since/--until: an absolute time or a span before now."""

    name = "TIME"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except ValueError as exc:
            self.fail(f"{value!r}: {exc}. Accepted: {TIME_FORMS}.", param, ctx)


TIME = TimeParam()


# ---- input formats ------------------------------------------------------------------

#: What `--format` accepts for files read (`ingest`, `collect --tail`).
INPUT_FORMATS = (
    "auto", "json-lines", "celery-log", "sidekiq-log", "rq-log", "arq-log", "dramatiq-log"
)


def input_format_option(command):  # type: ignore[no-untyped-def]
    return click.option(
        "--format",
        "input_format",
        type=click.Choice(INPUT_FORMATS),
        default="auto",
        show_default=True,
        help="What the files hold: auto tells it from each file's first lines; json-lines "
        "is JSON lines and OTLP JSON Lines (told apart line by line); celery-log is a "
        "Celery worker's own log; sidekiq-log a Sidekiq process's log (default or JSON "
        "format); rq-log and arq-log are RQ's and arq's worker logs; dramatiq-log a "
        "Dramatiq worker's (`dramatiq -v` for every run).",
    )(command)


def log_date_option(command):  # type: ignore[no-untyped-def]
    """--date: the date of the first line of logs whose lines carry only a time of day."""
    return click.option(
        "--date",
        "log_date",
        default=None,
        metavar="YYYY-MM-DD",
        help="The date of the first line of RQ and arq logs, whose lines carry only a time "
        "of day (later lines that go back past midnight take the next day). Default: each "
        "line is the latest moment at or before the file's modification time with its "
        "time of day (for a log of less than 24 hours).",
    )(command)


def log_date_settings(text: str | None):  # type: ignore[no-untyped-def]
    """The DayBasis of --date, or a usage error naming the bad date."""
    from collectors.time_of_day import DayBasis, parse_date

    if text is None:
        return None
    try:
        return DayBasis(date=parse_date(text))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--date") from exc


def celery_log_options(command):  # type: ignore[no-untyped-def]
    """--celery-hostname, --celery-timezone, --celery-log-format: what a Celery worker's
    log does not say."""
    command = click.option(
        "--celery-log-format",
        default=None,
        metavar="FORMAT",
        help="The workers' worker_log_format, where it is not Celery's default "
        "'[%(asctime)s: %(levelname)s/%(processName)s] %(message)s'. It needs %(asctime)s "
        "and %(message)s; with %(process)d the worker_id is NODE:PID of the main process.",
    )(command)
    command = click.option(
        "--celery-timezone",
        default=None,
        metavar="ZONE",
        help="The zone of the times in Celery logs (an IANA name such as Europe/Berlin, "
        "or +02:00). Celery writes its host's local time without an offset; without this "
        "flag the times are read as UTC.",
    )(command)
    return click.option(
        "--celery-hostname",
        default=None,
        metavar="NODE",
        help="The worker that wrote the Celery logs (its node name, e.g. celery@web-1), "
        "the worker_id of their events. Default: the node named in the log's 'ready.' "
        "line or banner, else the file's name.",
    )(command)


def celery_log_settings(  # type: ignore[no-untyped-def]
    hostname: str | None, zone: str | None, log_format: str | None = None
):
    """The CeleryLogOptions of the flags, or a usage error naming the bad zone or format."""
    from collectors.celery_log import CeleryLogOptions, compile_log_format, parse_zone

    for value, flag, check in ((zone, "--celery-timezone", parse_zone),
                               (log_format, "--celery-log-format", compile_log_format)):
        if value is not None:
            try:
                check(value)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint=flag) from exc
    return CeleryLogOptions.from_flags(hostname, zone, log_format)
