"""The `dupescope` command line: one click group, one subcommand per job."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from dupescope import (
    __version__,
    cli_collect,
    cli_dashboard,
    cli_demo,
    cli_forensics,
    cli_report,
    cli_status,
    cli_watch,
    cli_whatif,
    prompt_exit,
)
from dupescope.options import (
    INPUT_FORMATS,
    celery_log_options,
    celery_log_settings,
    field_mapping_or_exit,
    format_option,
    group_store_option,
    input_format_option,
    log_date_option,
    log_date_settings,
    mapping_option,
    open_store_or_exit,
    store_option,
)
from dupescope.output import emit_json, emit_rows, plain_rows

if TYPE_CHECKING:
    from store.base import Store

#: The timeline's columns the table shows (JSON carries them all).
TIMELINE_COLUMNS = [
    "ts",
    "execution",
    "event",
    "job_id",
    "delivery_attempt",
    "worker_id",
    "lock_owner",
    "lock_ttl_ms",
    "visibility_timeout_ms",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dupescope")
@group_store_option
@click.option(
    "--memory",
    metavar="SIZE",
    default=None,
    help="Memory budget of every heavy step (build, compaction, ingest, collector), e.g. "
    "4GB; beyond it they spill to disk. Default: $DUPESCOPE_MEMORY, else a quarter of the "
    "machine's RAM, never above the cgroup limit.",
)
def main(store_url: str | None, memory: str | None) -> None:
    """Find, explain and alert on duplicate job executions in at-least-once queues."""
    from store import memory as budget

    try:
        budget.configure(memory)
    except budget.BudgetError as exc:
        raise click.BadParameter(str(exc), param_hint="--memory") from exc


@main.command()
@click.argument("files", nargs=-1, required=True)
@store_option
@mapping_option
@click.option("--strict", is_flag=True, help="Exit non-zero on any bad line.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no per-line errors.")
@click.option(
    "--no-compact", is_flag=True,
    help="Leave the new segments unmerged (for a bulk load in many commands; the collector, "
    "`watch` or `dupescope compact` merges them later).",
)
@input_format_option
@celery_log_options
@log_date_option
def ingest(
    files: tuple[str, ...],
    store_url: str | None,
    mapping: str | None,
    strict: bool,
    quiet: bool,
    no_compact: bool,
    input_format: str,
    celery_hostname: str | None,
    celery_timezone: str | None,
    celery_log_format: str | None,
    log_date: str | None,
) -> None:
    """Load JSON-lines logs, OTLP JSON Lines, Celery, RQ or arq worker logs (plain or .gz; - for
    stdin).

    The format is detected from content. A bad line is reported with file, line number
    and reason, and the rest is kept. Ingesting the same file twice changes no answer.
    Celery log times are read as UTC unless --celery-timezone names their zone. RQ and
    arq lines carry only a time of day: their date is --date, else the file's
    modification time (docs/queues-rq-arq.md).
    """
    import os

    from tqdm import tqdm

    from collectors import ingest_pool

    # A large file's workers are forked from this process before it decodes anything: the
    # settings they need must be in place before polars loads here, and no thread of
    # tqdm's may run at the fork.
    worker_logs = [f for f in INPUT_FORMATS if f.endswith("-log")]
    forks = input_format not in worker_logs and ingest_pool.wanted(files)
    if forks:
        ingest_pool.settings()
        tqdm.monitor_interval = 0

    from collectors.files import ingest_files
    from collectors.normalise import Normaliser

    normaliser = Normaliser(field_mapping_or_exit(mapping))
    celery = celery_log_settings(celery_hostname, celery_timezone, celery_log_format)
    day = log_date_settings(log_date)
    for path in files:
        if path != "-" and os.path.isdir(path):
            raise click.ClickException(f"{path} is a directory: name the files in it to load")
        if path != "-" and not os.path.isfile(path):
            raise click.ClickException(f"no such file: {path}")
    store = open_store_or_exit(store_url, writable=True)
    total = sum(os.path.getsize(p) for p in files if p != "-")
    shown = 0
    with tqdm(
        total=total or None,
        unit="B",
        unit_scale=True,
        desc="ingest",
        disable=quiet or not sys.stderr.isatty(),
        file=sys.stderr,
    ) as bar:
        last = {"position": 0}

        def progress(position: int) -> None:
            bar.update(max(position - last["position"], 0))
            last["position"] = position

        def rejected(item) -> None:  # type: ignore[no-untyped-def]
            nonlocal shown
            if not quiet and shown < 50:
                tqdm.write(f"rejected {item}", file=sys.stderr)
            shown += 1

        try:
            report = ingest_files(
                list(files),
                store,
                normaliser,
                on_progress=progress,
                on_rejected=rejected,
                fmt=input_format,
                celery=celery,
                fork_workers=forks,
                day=day,
            )
        except OSError as exc:  # a full disk, a folder made read-only meanwhile
            raise click.ClickException(f"cannot load into {store.describe()}: {exc}") from exc
    if shown > 50 and not quiet:
        click.echo(f"... and {shown - 50} more rejected lines", err=True)
    click.echo(report.summary(), err=True)
    if report.rows and not no_compact and (segmented_store := store.segmented()) is not None:
        # Readers pay for every small segment a day holds; merged now, the next
        # `timeline` or `duplicates` reads a compacted store.
        merged = segmented_store.compact()
        if merged and not quiet:
            click.echo(f"compacted {merged} segment(s)", err=True)
    # Every segment is durable once written: with the store closed, nothing is left that
    # the interpreter's teardown would finish (a database store may still be flushing).
    segmented = store.segmented() is not None
    store.close()
    if segmented:
        prompt_exit.ask()
    if report.rows == 0 and report.lines > 0:
        sys.exit(1)
    if strict and report.rejected:
        sys.exit(2)


@main.command()
@click.argument("key")
@store_option
@format_option
@click.option(
    "--verdict/--no-verdict",
    default=True,
    show_default=True,
    help="Open with the verdict the dashboard gives. It takes its cause from the store's "
    "duplicates answer: on a store that changed since that was last built, the first "
    "timeline pays for the build; --no-verdict reads the key's events alone.",
)
def timeline(key: str, store_url: str | None, fmt: str, verdict: bool) -> None:
    """Every event of an idempotency key (or a job_id), in time order, by execution, and
    the verdict on the key that the dashboard's timeline page shows.

    The table opens with the verdict; JSON rows are the timeline's events, each carrying
    the same `verdict` object (text, harmful, cause, causes, job_type, cause_line, outcome).
    """
    store = open_store_or_exit(store_url, existing=True)
    try:
        _print_timeline(store, key, fmt, verdict)
    finally:
        store.close()
    # What a build of the derived state kept is durable once placed: nothing is left for
    # the interpreter's teardown (0.05 s of a 0.4 s command).
    prompt_exit.ask()


def _print_timeline(store: Store, key: str, fmt: str, verdict: bool) -> None:
    from queries.key_verdict import key_verdict, timeline_rows

    nothing = f"no events for {key!r} in {store.describe()}"
    if not verdict:
        rows = plain_rows(timeline_rows(store, key))
        emit_rows(rows, TIMELINE_COLUMNS if fmt == "table" else _columns_of(rows), fmt,
                  empty=nothing)
        return
    found = key_verdict(store, key)
    rows = plain_rows(found.timeline)
    if not rows or fmt == "csv":
        emit_rows(rows, _columns_of(rows), fmt, empty=nothing)
        return
    if fmt == "json":
        emit_json([{**row, "verdict": found.verdict.as_dict()} for row in rows])
        return
    click.echo(found.verdict.text)
    if found.verdict.cause_line:
        click.echo(found.verdict.cause_line)
    click.echo()
    emit_rows(rows, TIMELINE_COLUMNS, fmt)


def _columns_of(rows: list[dict[str, object]]) -> list[str]:
    """A timeline's columns: its rows' keys (the timeline query's when it has none)."""
    from queries.timeline_rows import ANSWER_COLUMNS

    return list(rows[0]) if rows else list(ANSWER_COLUMNS)


@main.command()
@store_option
@click.option(
    "--older-than-days",
    type=click.IntRange(min=1),
    default=None,
    help="Also drop whole days older than this (retention).",
)
def compact(store_url: str | None, older_than_days: int | None) -> None:
    """Merge small segments of the embedded store and apply retention."""
    from datetime import UTC, datetime, timedelta

    store = open_store_or_exit(store_url, existing=True).segmented()
    if store is None:
        raise click.ClickException("compact is for the embedded store; ClickHouse merges by itself")
    if older_than_days:
        cutoff = (datetime.now(UTC) - timedelta(days=older_than_days)).date()
        dropped = store.drop_days_before(cutoff)
        click.echo(f"dropped {len(dropped)} day(s) before {cutoff}", err=True)
    replaced = store.compact()
    click.echo(f"compacted {replaced} segment(s)", err=True)


@main.command()
@store_option
def rebuild(store_url: str | None) -> None:
    """Build the derived tables and kept answers from nothing (a first load, or a repair).

    The forensic questions read tables derived from the events, built once per snapshot
    of the store and kept beside it; `rebuild` trusts none of that and builds them again.
    """
    from queries.derived import rebuild as rebuild_derived

    store = open_store_or_exit(store_url, existing=True)
    click.echo(f"rebuilding the derived tables of {store.describe()} ...", err=True)
    started = time.perf_counter()
    with _steps_shown(started):  # at 100M events a build runs for half an hour
        rebuild_derived(store)
    click.echo(f"rebuilt in {time.perf_counter() - started:.1f} s", err=True)


@contextlib.contextmanager
def _steps_shown(started: float) -> Iterator[None]:
    """Each step of a derivation on stderr as it ends (the derivation logs them at debug
    level), after the seconds since `started`."""

    class Steps(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            elapsed = time.perf_counter() - started
            click.echo(f"  {elapsed:8.1f} s  {record.getMessage()}", err=True)

    logger = logging.getLogger("dupescope.queries")
    handler, level = Steps(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


for command in (
    cli_forensics.duplicates,
    cli_forensics.alerts,
    cli_forensics.stats,
    cli_forensics.lint,
    cli_watch.watch,
    cli_collect.collect,
    cli_dashboard.dashboard,
    cli_demo.demo,
    cli_whatif.whatif,
    cli_report.report,
    cli_status.status,
):
    main.add_command(command)


def program() -> None:
    """The `dupescope` program (console script and `python -m dupescope.cli`)."""
    prompt_exit.run(main)


if __name__ == "__main__":  # pragma: no cover
    program()
