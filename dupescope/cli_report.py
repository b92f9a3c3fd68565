"""`dupescope report`: one key's forensics, or an alert's, as one file to share."""

from __future__ import annotations

import click

from dupescope.options import open_store_or_exit, store_option


@click.command()
@click.argument("key", required=False)
@store_option
@click.option("--incident", "alert_id", help="An alert's id (as `watch` sent it): report "
              "the incident and every key it names.")
@click.option("--format", "fmt", type=click.Choice(("html", "md")), default="html",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write here (default: stdout).")
def report(key: str | None, store_url: str | None, alert_id: str | None, fmt: str,
           output: str | None) -> None:
    """Write the incident report of KEY (or of --incident ALERT_ID): verdict and cause,
    the timeline as an embedded SVG, executions, side effects, locks against duration,
    the settings that would have prevented it, related keys. Self-contained: the HTML has
    no script and requests nothing."""
    from dashboard.report import incident_document, key_document, render

    if (key is None) == (alert_id is None):
        raise click.UsageError("give a KEY or --incident ALERT_ID (one of them)")
    store = open_store_or_exit(store_url, existing=True)
    if alert_id is not None:
        found = incident_document(store, alert_id)
        if found is None:
            raise click.ClickException(
                f"no alert {alert_id!r} in {store.describe()}: neither `watch` recorded it "
                "nor do the rules find it now")
        document = found
    else:
        assert key is not None
        document = key_document(store, key)
        if document.keys[0].forensics.timeline.empty:
            raise click.ClickException(f"no events for key {key!r} in {store.describe()}")
    text = render(document, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
        click.echo(f"wrote {output}", err=True)
