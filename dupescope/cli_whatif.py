"""`dupescope whatif`: the duplicates and recovery cost of proposed queue settings."""

from __future__ import annotations

import re
from typing import Any

import click

from dupescope.cli_forensics import filter_options
from dupescope.options import open_store_or_exit, store_option
from dupescope.output import emit_json

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}


class SpanParam(click.ParamType):
    """A duration: `90s`, `2m`, `1500ms`, `1h`, or a bare number of milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        match = _SPAN.match(str(value))
        if match is None or float(match.group(1)) <= 0:
            self.fail(f"{value!r} is no positive duration: write 90s, 2m, 1500ms or 1h",
                      param, ctx)
        return round(float(match.group(1)) * _UNIT_MS[match.group(2) or "ms"])


SPAN = SpanParam()

#: The table lists this many of the keys that change; JSON lists them all.
SHOWN_KEYS = 50


@click.command()
@store_option
@click.option("--visibility-timeout", "visibility_timeout", type=SPAN,
              help="Proposed visibility timeout (90s, 2m, 1500ms; bare: ms).")
@click.option("--lock-ttl", "lock_ttl", type=SPAN, help="Proposed lock TTL.")
@click.option("--heartbeat", type=SPAN,
              help="Renew the lock and extend visibility this often while a run lives.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table",
              show_default=True)
@filter_options
def whatif(store_url: str | None, visibility_timeout: int | None, lock_ttl: int | None,
           heartbeat: int | None, fmt: str, filters: dict[str, Any]) -> None:
    """Replay the observed runs under proposed settings: per job type, duplicates and
    harmful ones before and after, the added recovery delay of crashed runs (p50, p95,
    max), the keys that change, and what the replay cannot know (docs/whatif.md)."""
    from queries.whatif import Settings
    from queries.whatif import whatif as replay

    try:
        settings = Settings(visibility_timeout, lock_ttl, heartbeat)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if not settings.changed:
        raise click.UsageError(
            "name a setting to try: --visibility-timeout, --lock-ttl or --heartbeat")
    store = open_store_or_exit(store_url, existing=True)
    answer = replay(store, settings, **filters)
    if fmt == "json":
        emit_json(answer.rows())
        return
    _print_table(answer)


def _print_table(answer: Any) -> None:
    from dupescope.output import emit

    summary = answer.summary
    if summary.empty:
        click.echo("no duplicates in the runs selected: nothing to replay")
    else:
        shown = summary.assign(**{
            c: summary[c].map(lambda v: "-" if v is None or v != v else f"{v:.0f}")
            for c in ("added_delay_p50_ms", "added_delay_p95_ms", "added_delay_max_ms")})
        emit(shown, "table")
    if not answer.keys.empty:
        click.echo()
        click.echo(f"== keys that change ({len(answer.keys):,})")
        emit(answer.keys.head(SHOWN_KEYS), "table")
        if len(answer.keys) > SHOWN_KEYS:
            click.echo(f"... and {len(answer.keys) - SHOWN_KEYS:,} more (--format json lists "
                       "them all)")
    click.echo()
    click.echo("== what the replay cannot know")
    for line in answer.cannot_know:
        click.echo(f"- {line}")
