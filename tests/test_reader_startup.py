"""What a fresh reader of a derived store pays before it answers: a process that reads the
kept answers or derived tables alone binds no `events` view over every segment, and
`dupescope duplicates --format json` of a derived store loads no pandas. Reading `events`
afterwards still sees every segment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import events_to_table
from forensics_cases import run

from queries import derived
from queries.duplicates_table import duplicates_arrow
from queries.loader import sql_text
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]


def _charged_twice(key: str) -> list[dict]:
    """Two deliveries of one charge, each with the side effect."""
    return [
        {**e, "idempotency_key": key}
        for e in run(f"{key}-job", 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03", "ack")])
        + run(f"{key}-job", 2, "w2", "01:01", [("01:02", "side_effect"), ("01:03", "ack")])
    ]


def _views(store: EmbeddedStore) -> set[str]:
    rows = store.connection(events=False).execute("SELECT view_name FROM duckdb_views()")
    return {name for (name,) in rows.fetchall()}


def test_reading_the_duplicates_answer_binds_no_events_view(tmp_path: Path) -> None:
    writer = EmbeddedStore(tmp_path)
    writer.write(events_to_table(_charged_twice("order-1")))
    derived.ensure(writer)
    writer.write(events_to_table(_charged_twice("order-2")))

    reader = EmbeddedStore(tmp_path)  # a new process: derives the second batch, then reads
    keys = duplicates_arrow(reader).column("key").to_pylist()

    assert sorted(keys) == ["order-1", "order-2"]
    assert "events" not in _views(reader)


def test_a_listing_brought_up_to_date_binds_no_events_view(tmp_path: Path) -> None:
    from queries import duplicates

    writer = EmbeddedStore(tmp_path)
    writer.write(events_to_table(_charged_twice("order-1")))
    derived.ensure(writer)
    page = EmbeddedStore(tmp_path)  # the dashboard's process
    assert list(duplicates(page)["key"]) == ["order-1"]
    writer.write(events_to_table(_charged_twice("order-2")))

    keys = list(duplicates(page)["key"])  # the next refresh: only the batch's keys read

    assert sorted(keys) == ["order-1", "order-2"]
    assert "events" not in _views(page)


def test_a_filtered_listing_binds_no_events_view(tmp_path: Path) -> None:
    from queries import duplicates

    writer = EmbeddedStore(tmp_path)
    writer.write(events_to_table(_charged_twice("order-1")))
    derived.ensure(writer)
    page = EmbeddedStore(tmp_path)

    keys = list(duplicates(page, since="2025-11-30T00:00:00Z")["key"])

    assert keys == ["order-1"]
    assert "events" not in _views(page)


def test_a_timeline_after_a_filtered_listing_holds_the_new_segment(tmp_path: Path) -> None:
    from queries import duplicates, timeline

    store = EmbeddedStore(tmp_path)
    store.write(events_to_table(_charged_twice("order-1")))
    assert len(timeline(store, "order-1")) == 6
    store.write(events_to_table(_charged_twice("order-2")))

    duplicates(store, since="2025-11-30T00:00:00Z")  # derived tables alone
    events = timeline(store, "order-2")

    assert len(events) == 6


def test_only_a_query_that_names_an_events_view_reads_events() -> None:
    assert derived.reads_events(sql_text("timeline", "duckdb"))
    assert derived.reads_events(sql_text("store_summary", "duckdb"))
    assert not derived.reads_events(sql_text("duplicates", "duckdb"))
    assert not derived.reads_events(sql_text("lock_overruns", "duckdb"))
    assert not derived.reads_events("-- unlike the events view\nSELECT 1 FROM derived_jobs")


def test_events_read_after_the_answer_holds_every_segment(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    store.write(events_to_table(_charged_twice("order-1")))
    assert store.arrow("SELECT count(*) AS n FROM events").column("n")[0].as_py() == 6
    store.write(events_to_table(_charged_twice("order-2")))

    duplicates_arrow(store)  # pins the new segments without binding `events` to them
    counted = store.arrow("SELECT count(*) AS n FROM events").column("n")[0].as_py()

    assert counted == 12


@pytest.mark.parametrize("options", [[], ["--since", "2025-11-30T00:00:00Z"]],
                         ids=["every", "since"])
def test_duplicates_as_json_loads_no_pandas(tmp_path: Path, options: list[str]) -> None:
    store = EmbeddedStore(tmp_path)
    store.write(events_to_table(_charged_twice("order-1")))
    derived.ensure(store)
    store.write(events_to_table(_charged_twice("order-2")))
    derived.ensure(store)  # as a running dashboard or `watch` absorbs each batch
    store.close()
    argv = ["dupescope", "duplicates", "--store", str(tmp_path), "--format", "json", *options]
    code = (
        "import sys\n"
        "from dupescope.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('pandas' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert [row["key"] for row in json.loads(done.stdout)] == ["order-1", "order-2"]
    assert done.stderr.strip().splitlines()[-1] == "False"
