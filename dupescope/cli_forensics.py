"""Forensic subcommands: duplicates, alerts, stats (the checklist) and lint."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import click

from dupescope.options import (
    TIME,
    format_option,
    open_store_or_exit,
    rules_option,
    store_option,
)
from dupescope.output import emit, emit_arrow_json, stdout_for_bytes


def filter_options(command):  # type: ignore[no-untyped-def]
    """--job-type, --queue, --since, --until: which executions a command looks at.

    The command receives them as one `filters` mapping, the keyword arguments every query
    of the library takes.
    """

    @functools.wraps(command)
    def with_filters(
        *args: Any,
        job_type: str | None,
        queue: str | None,
        since: datetime | None,
        until: datetime | None,
        **kwargs: Any,
    ) -> Any:
        filters = {"job_type": job_type, "queue": queue, "since": since, "until": until}
        return command(*args, filters=filters, **kwargs)

    for option in reversed(
        [
            click.option("--job-type", help="Only this job type (task name)."),
            click.option("--queue", help="Only this queue / topic."),
            click.option(
                "--since",
                type=TIME,
                help="Executions starting at or after: RFC 3339 (no zone: UTC), or a span "
                "before now (30m, 1h, 7d).",
            ),
            click.option(
                "--until",
                type=TIME,
                help="Executions starting before: RFC 3339 (no zone: UTC), or a span before "
                "now (30m, 1h, 7d).",
            ),
        ]
    ):
        with_filters = option(with_filters)
    return with_filters


def forensic_command(function):  # type: ignore[no-untyped-def]
    """A forensic subcommand: --store, --format, then the filters and its own options."""
    return click.command()(store_option(format_option(filter_options(function))))


@forensic_command
def duplicates(store_url: str | None, fmt: str, filters: dict[str, Any]) -> None:
    """Keys that ran more than once, with cause and outcome (harmful or absorbed)."""
    store = open_store_or_exit(store_url, existing=True, since=filters["since"])
    if fmt == "json":  # every duplicate at once, as Arrow: neither pandas nor Python objects
        if not any(filters.values()):  # all of them: kept rendered where the store keeps it
            from queries.derived import write_duplicates_listing

            with stdout_for_bytes() as out:
                if write_duplicates_listing(store, out):
                    return
        from queries.duplicates_table import duplicates_arrow

        emit_arrow_json(duplicates_arrow(store, **filters))
        return
    from queries import duplicates as find_duplicates

    frame = find_duplicates(store, **filters)
    if fmt == "table" and not frame.empty:
        frame = frame.assign(
            job_ids=frame["job_ids"].map(", ".join), causes=frame["causes"].map(", ".join)
        )
    emit(frame, fmt, empty=f"no duplicates in {store.describe()}")


@forensic_command
@rules_option
def alerts(
    store_url: str | None,
    fmt: str,
    filters: dict[str, Any],
    rules_path: str | None,
) -> None:
    """Evaluate the alert rules once (the same rules `watch` fires on); records nothing.

    Rows hold rule, key, job_id, delivery_attempt, lock_key, lock_owner, expired_at,
    execution_end, overrun_ms and overlapped_by, then worker_id, job_type, event, ts,
    severity, summary, alert_id and incident_ts.
    """
    from alerts import RulesError, evaluate, load_rules, to_frame

    try:
        rules = load_rules(rules_path)
    except RulesError as exc:
        raise click.ClickException(str(exc)) from exc
    store = open_store_or_exit(store_url, existing=True, since=filters["since"])
    frame = to_frame(evaluate(store, rules, **filters))
    emit(frame, fmt, empty=f"no alerts in {store.describe()}")


@forensic_command
@click.option(
    "--item",
    type=click.Choice(
        [
            "lock_contention",
            "redeliveries",
            "idempotency",
            "occ_conflicts",
            "outbox_lag",
            "crash_loops",
            "clock_skew",
            "cache_stampedes",
            "durations",
        ]
    ),
    help="Only one item of the checklist.",
)
def stats(
    store_url: str | None,
    fmt: str,
    filters: dict[str, Any],
    item: str | None,
) -> None:
    """The duplicate-safety checklist: contention, redeliveries, idempotency hits, outbox
    lag, OCC conflicts, crash loops, clock skew, cache stampedes and durations.

    JSON prints one array of rows, each naming its `item`.
    """
    from queries import checklist, durations

    store = open_store_or_exit(store_url, existing=True, since=filters["since"])
    items = checklist(store, **filters)
    items["durations"] = durations(store, **filters)
    chosen = {item: items[item]} if item else items
    if fmt == "table":
        for name, frame in chosen.items():
            click.echo(f"== {name}")
            emit(frame, fmt, empty="(nothing observed)")
            click.echo()
        return
    rows = [frame.assign(item=name) for name, frame in chosen.items() if not frame.empty]
    import pandas as pd

    combined = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["item"])
    combined = combined[["item", *[c for c in combined.columns if c != "item"]]]
    emit(combined, fmt)


@forensic_command
def lint(store_url: str | None, fmt: str, filters: dict[str, Any]) -> None:
    """Name unsafe settings from observed durations, redeliveries and lock releases."""
    from queries import lint as lint_store

    store = open_store_or_exit(store_url, existing=True, since=filters["since"])
    frame = lint_store(store, **filters)
    emit(frame, fmt, empty="no unsafe settings found")
