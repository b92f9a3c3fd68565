"""`dupescope watch`: evaluate the alert rules as events arrive and deliver each incident once."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta
from typing import Any

import click

from dupescope.options import open_store_or_exit, rules_option, store_option
from store.base import SegmentedStore


@click.command()
@store_option
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    envvar="DUPESCOPE_WEBHOOK",
    help="POST each new alert here (repeatable; env: space-separated URLs).",
)
@click.option(
    "--webhook-format",
    type=click.Choice(["json", "slack"]),
    default="json",
    show_default=True,
    envvar="DUPESCOPE_WEBHOOK_FORMAT",
    help="json: the alert document; slack: {'text': ...} for Slack-compatible webhooks.",
)
@click.option(
    "--dashboard-url",
    default="http://127.0.0.1:8501",
    show_default=True,
    envvar="DUPESCOPE_DASHBOARD_URL",
    help="Base of the timeline links in alerts (<url>/timeline?key=...).",
)
@rules_option
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    envvar="DUPESCOPE_METRICS_PORT",
    help="Serve Prometheus /metrics on this port.",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between checks for new events (unchanged data costs one listing).",
)
@click.option(
    "--lateness",
    type=click.FloatRange(min=0),
    default=900.0,
    show_default=True,
    help="Seconds of event time behind the watermark still examined for late events.",
)
@click.option(
    "--all-history",
    is_flag=True,
    help="On the first round (no alert state yet), alert on every incident already in "
    "the store; by default only on those within --lateness of the newest event.",
)
@click.option("--once", is_flag=True, help="One evaluation and delivery pass, then exit.")
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    help="Delivery attempts before giving up (env DUPESCOPE_ALERT_MAX_ATTEMPTS; default 10).",
)
@click.option(
    "--backoff",
    type=click.FloatRange(min=0),
    help="First retry delay in seconds, doubled per retry, jittered "
    "(env DUPESCOPE_ALERT_BACKOFF_S; default 0.5).",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every evaluation and delivery.")
def watch(
    store_url: str | None,
    webhooks: tuple[str, ...],
    webhook_format: str,
    dashboard_url: str,
    rules_path: str | None,
    metrics_port: int | None,
    metrics_host: str,
    interval: float,
    lateness: float,
    all_history: bool,
    once: bool,
    max_attempts: int | None,
    backoff: float | None,
    verbose: bool,
) -> None:
    """Evaluate the alert rules continuously; fire each incident once and deliver it.

    Incidents are kept in the store (under <store>/alerts/ for a folder, in `alerts`
    tables on ClickHouse) with their deliveries queued before sending, so a restart
    neither repeats an alert nor loses one owed to a webhook. Each POST carries
    `Idempotency-Key: <alert id>`, so a receiver can drop the repeat a crash may cause.
    """
    from alerts.delivery import Dispatcher, RetryPolicy
    from alerts.metrics import AlertMetrics
    from alerts.rules import RulesError, load_rules
    from alerts.sinks import WebhookSink
    from alerts.state import open_state
    from alerts.watch import Watcher

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        rules = load_rules(rules_path)
        policy = RetryPolicy.from_settings(max_attempts=max_attempts, base_s=backoff)
        sinks = [
            WebhookSink(url, fmt=webhook_format, dashboard_url=dashboard_url) for url in webhooks
        ]
    except (RulesError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc

    store = open_store_or_exit(store_url, existing=True)
    segmented = store.segmented()
    if segmented is not None:  # a long-running process: no progress bars in its log
        segmented.connection().execute("SET enable_progress_bar = false")
    state = open_state(store)
    metrics = AlertMetrics()
    metrics.follow_reads(store)
    metrics.follow_builds(store)
    stop = threading.Event()
    server = None
    if metrics_port is not None:
        try:
            server = metrics.serve(metrics_port, metrics_host)
        except OSError as exc:
            message = f"cannot serve metrics on port {metrics_port}: {exc}"
            raise click.ClickException(message) from exc
    dispatcher = Dispatcher(state, sinks, policy=policy, metrics=metrics, stop=stop)
    watcher = Watcher(
        store,
        rules,
        state,
        sinks,
        dispatcher,
        metrics,
        lateness=timedelta(seconds=lateness),
        history=all_history,
    )
    try:
        if once:
            new = watcher.tick()
            click.echo(
                f"{len(new)} new alert(s); {state.pending_count()} delivery(ies) pending",
                err=True,
            )
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        compactor = _background_compaction(segmented)
        click.echo(
            f"watching {store.describe()} every {interval:g}s; "
            f"{len(sinks)} webhook(s)"
            + (f"; metrics on {metrics_host}:{metrics_port}" if server else ""),
            err=True,
        )
        watcher.run(interval, stop)
    finally:
        if "compactor" in locals() and compactor is not None:
            compactor.stop()
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
        state.close()
        store.close()


def _background_compaction(segmented: SegmentedStore | None) -> Any:
    """A store fed by a collector without its own compaction, or by repeated ingests,
    is kept merged while `watch` runs (on a store object of its own: merges take the
    store's maintenance lock, so a collector compacting too waits its turn)."""
    if segmented is None:
        return None
    from collectors.service.compaction import Compactor
    from store.open import open_store

    own = open_store(str(segmented.root)).segmented()
    if own is None:
        return None
    return Compactor(own, interval=30.0, min_segments=16).start()
