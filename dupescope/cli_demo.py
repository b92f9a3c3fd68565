"""`dupescope demo`: the sample workload into the embedded store, a summary, the dashboard."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dupescope.cli_dashboard import launch_dashboard
from dupescope.options import (
    no_browser_option,
    open_store_or_exit,
    port_option,
    store_given_on_command_line,
)
from dupescope.output import emit

if TYPE_CHECKING:  # imported where used, as `dupescope.output` does
    import pandas as pd

DEFAULT_DEMO_STORE = "./dupescope-data"


def _ingest_with_progress(paths: list[str], store) -> None:  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    from collectors.files import ingest_files

    total = sum(Path(p).stat().st_size for p in paths)
    with tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc="loading events",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
    ) as bar:
        seen = {"position": 0}

        def progress(position: int) -> None:
            bar.update(max(position - seen["position"], 0))
            seen["position"] = position

        report = ingest_files(paths, store, on_progress=progress)
    click.echo(report.summary(), err=True)


def summary(store) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Duplicates per cause, harmful, absorbed and unknown (no run reported its effect)
    apart: the first thing to look at."""
    import pandas as pd

    from queries import duplicates

    found = duplicates(store)
    if found.empty:
        return pd.DataFrame(columns=["cause", "duplicates", "harmful", "absorbed", "unknown"])
    outcome = found["outcome"]
    table = (
        found.assign(**{name: outcome == name for name in ("harmful", "absorbed", "unknown")})
        .groupby("cause")
        .agg(duplicates=("key", "size"), harmful=("harmful", "sum"),
             absorbed=("absorbed", "sum"), unknown=("unknown", "sum"))
        .reset_index()
    )
    return table.sort_values("duplicates", ascending=False)


@click.command()
@click.pass_context
@click.option(
    "--store",
    "store_url",
    default=None,
    help="Embedded store folder to load into (default ./dupescope-data, or "
    "./dupescope-demo-N for --events N).",
)
@click.option(
    "--events",
    type=click.IntRange(min=100),
    default=None,
    help="Generate a fresh workload of about N events instead of the shipped sample.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Seed for --events.")
@port_option
@no_browser_option
@click.option("--no-dashboard", is_flag=True, help="Load and summarise, then exit.")
def demo(
    ctx: click.Context,
    store_url: str | None,
    events: int | None,
    seed: int,
    port: int,
    no_browser: bool,
    no_dashboard: bool,
) -> None:
    """Load the sample workload into the embedded store and open the dashboard.

    The sample is a seeded model of producers, a broker, workers, locks and failures
    (retries, crashes, visibility timeouts, lock expiry). Loading it twice changes nothing.
    """
    import sample_data

    # Not DUPESCOPE_STORE: the demo loads a sample into a folder of its own, never into a
    # store the environment names for real work; `dupescope --store X demo` is fine.
    store_url = store_url or store_given_on_command_line(ctx)
    folder = store_url or (f"./dupescope-demo-{events}-{seed}" if events else DEFAULT_DEMO_STORE)
    if "://" in folder:
        raise click.BadParameter(
            "the demo loads into a folder (the embedded store)", param_hint="--store"
        )
    store = open_store_or_exit(folder, writable=True)
    if events:
        click.echo(f"generating a workload of about {events} events (seed {seed})", err=True)
        workload = sample_data.generate(seed=seed, target_events=events)
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "workload.jsonl"
            workload.write_jsonl(path)
            _ingest_with_progress([str(path)], store)
    else:
        _ingest_with_progress([str(sample_data.SAMPLE_PATH)], store)
    store.compact()

    table = summary(store)
    click.echo("\nDuplicate executions by cause:")
    emit(table, "table", empty="no duplicates in this workload")
    worst = _worst_key(store)
    if worst:
        command = f"dupescope timeline {shlex.quote(worst)} --store {shlex.quote(folder)}"
        click.echo(f"\nA harmful one to start with: {command}")
    if no_dashboard:
        return
    if worst:
        click.echo(f"Its timeline in the dashboard: {timeline_link(worst, port)}")
    sys.exit(launch_dashboard(str(Path(folder).resolve()), port, open_browser=not no_browser))


def timeline_link(key: str, port: int) -> str:
    from dashboard.links import fits_in_url, timeline_link

    link = timeline_link(key, f"http://127.0.0.1:{port}")
    if fits_in_url(key):
        return link
    return f"{link} (the key is too long for a link: pick it among the matches)"


def _worst_key(store) -> str | None:  # type: ignore[no-untyped-def]
    from queries import duplicates

    found = duplicates(store)
    harmful = found[found["outcome"] == "harmful"] if not found.empty else found
    if harmful.empty:
        return None
    return str(harmful.sort_values(["side_effects", "executions"], ascending=False)["key"].iloc[0])
