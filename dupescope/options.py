"""Options and helpers shared by every `dupescope` subcommand."""

from __future__ import annotations

import click

from dupescope.output import FORMATS

STORE_HELP = (
    "Where events live: a folder (embedded store), clickhouse://user:pass@host:8123/db "
    "or chdb:///path. Default: $DUPESCOPE_STORE or ./dupescope-data."
)


def store_option(command):  # type: ignore[no-untyped-def]
    return click.option("--store", "store_url", envvar="DUPESCOPE_STORE", help=STORE_HELP)(command)


def format_option(command):  # type: ignore[no-untyped-def]
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True
    )(command)


def open_store_or_exit(url: str | None):  # type: ignore[no-untyped-def]
    from store import StoreError, open_store

    try:
        return open_store(url)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc
