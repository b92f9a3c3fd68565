"""`dupescope status`: what the store holds and what needs attention, for a person."""

from __future__ import annotations

import json

import click

from dupescope.options import open_store_or_exit, store_option


@click.command()
@store_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def status(store_url: str | None, fmt: str) -> None:
    """Events, days, segments per day and how many await compaction, how far the derived
    state is behind, disk use per part, the memory budget, and warnings. Exits 1 when
    there is a warning."""
    from store.embedded import EmbeddedStore
    from store.memory import human
    from store.status import status as status_of

    store = open_store_or_exit(store_url, existing=True)
    if not isinstance(store, EmbeddedStore):
        raise click.ClickException("status is for the embedded store; ClickHouse has "
                                   "system.parts and system.merges")
    found = status_of(store)
    if fmt == "json":
        click.echo(json.dumps(found.as_dict(), indent=1))
    else:
        click.echo(f"store        {store.root}")
        click.echo(f"events       {found.events:,} over {len(found.days)} day(s)")
        lag = found.derived_lag_s
        click.echo("derived      " + ("not built yet" if lag is None else f"{lag:.0f} s behind"))
        click.echo(f"memory       {human(found.memory_budget_bytes)} "
                   f"(from {found.memory_budget_from})")
        click.echo("disk         " + ", ".join(
            f"{part} {human(size)}" for part, size in found.disk_bytes.items())
            + f"; {human(found.disk_free_bytes)} free")
        click.echo("\nday          events      segments  awaiting compaction")
        for day in found.days:
            click.echo(f"{day.day}  {day.events:>11,}  {day.segments:>8}  "
                       f"{day.awaiting_compaction:>8}")
        for warning in found.warnings:
            click.echo(f"warning: {warning}")
    store.close()
    if found.warnings:
        raise SystemExit(1)
