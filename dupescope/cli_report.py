"""`dupescope report`: one key's forensics, or an alert's, as one file to share."""

from __future__ import annotations

from typing import Any

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
    from dashboard.report import Document, render
    from queries.key_report import key_report

    if (key is None) == (alert_id is None):
        raise click.UsageError("give a KEY or --incident ALERT_ID (one of them)")
    store = open_store_or_exit(store_url, existing=True)
    if alert_id is not None:
        alert = find_alert(store, alert_id)
        if alert is None:
            raise click.ClickException(
                f"no alert {alert_id!r} in {store.describe()}: neither `watch` recorded it "
                "nor do the rules find it now")
        keys = [k for k in dict.fromkeys([alert.get("key")]) if k]
        facts = [(name, alert.get(name)) for name in (
            "alert_id", "rule", "severity", "summary", "job_type", "job_id", "lock_key",
            "lock_owner", "overlapped_by", "overrun_ms", "incident_ts") if alert.get(name)]
        document = Document(f"Incident {alert_id}", facts,
                            [key_report(store, k) for k in keys])
    else:
        assert key is not None
        found = key_report(store, key)
        if found.forensics.timeline.empty:
            raise click.ClickException(f"no events for key {key!r} in {store.describe()}")
        document = Document(f"Incident report: {key}", [], [found])
    text = render(document, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
        click.echo(f"wrote {output}", err=True)


def find_alert(store: Any, alert_id: str) -> dict[str, Any] | None:
    """The alert `watch` recorded under `alert_id`, else the one the rules find now (ids
    depend only on the rule and the incident, so they match)."""
    from alerts import evaluate, load_rules
    from alerts.model import document
    from alerts.state import open_state

    state = open_state(store)
    try:
        history = state.history(limit=1_000_000)
    finally:
        state.close()
    hits = history[history["alert_id"] == alert_id]
    if not hits.empty:
        return {str(k): v for k, v in hits.iloc[0].to_dict().items()}
    for alert in evaluate(store, load_rules(None)):
        if alert.id == alert_id:
            return document(alert)
    return None
