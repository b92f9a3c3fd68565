"""A build of the derived tables from nothing tells each step as it begins, and its end, on
chDB and on the embedded store: the CLI names the steps of a long build on stderr,
`/metrics` counts the steps left, and the dashboard draws a bar while a page waits for one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from forensics_cases import run

from alerts.metrics import AlertMetrics
from derive.embedded import partitioned
from derive.progress import BuildProgress
from dupescope import options
from dupescope.cli import main
from queries import derived, duplicates
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore


def acked(job: str, key: str, start: str = "00:01") -> list[dict]:
    return run(job, 1, "w1", start, [("00:02", "side_effect"), ("00:03", "ack")],
               idempotency_key=key)


@pytest.fixture
def chdb(tmp_path: Path, make_table) -> Iterator[ChdbStore]:
    """A chDB store holding one duplicated key, its derived tables not built yet."""
    opened = ChdbStore(str(tmp_path / "chdb"))
    opened.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05")))
    yield opened
    opened.close()


@pytest.fixture
def embedded(tmp_path: Path, make_table) -> Iterator[EmbeddedStore]:
    """An embedded store holding one duplicated key, its derived state not built yet."""
    opened = EmbeddedStore(tmp_path / "embedded")
    opened.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05")))
    yield opened
    opened.close()


def told_while(store, work) -> list[BuildProgress]:  # type: ignore[no-untyped-def]
    told: list[BuildProgress] = []
    with derived.following_builds(store, told.append):
        work()
    return told


def test_a_build_tells_each_step_as_it_begins_then_its_end(chdb) -> None:
    told = told_while(chdb, lambda: derived.ensure(chdb))
    steps, end = told[:-1], told[-1]
    total = end.steps_total
    assert [p.steps_done for p in steps] == list(range(total))
    assert steps[0].step == "events"
    assert "derived_executions" in [p.step for p in steps]
    assert not any(p.finished for p in steps)
    assert end.finished and end.steps_done == total


def in_order(told: list[BuildProgress]) -> bool:
    """Each step told once, in order, of one total, then the build's end."""
    *steps, end = told
    return ([p.steps_done for p in steps] == list(range(end.steps_total))
            and all(p.steps_total == end.steps_total and not p.finished for p in steps)
            and end.finished and end.steps_done == end.steps_total)


def test_an_embedded_build_tells_each_step_then_its_end(embedded) -> None:
    told = told_while(embedded, lambda: duplicates(embedded))
    assert in_order(told)
    names = [p.step for p in told[:-1]]
    assert names[0] == "unique_events" and "derived_executions" in names
    assert names[-1] == "duplicates listing"


def test_an_embedded_build_in_parts_tells_each_part(
    embedded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partitioned, "parts_for", lambda events: 3)
    told = told_while(embedded, lambda: duplicates(embedded))
    assert in_order(told)
    names = [p.step for p in told[:-1]]
    assert names[:4] == ["events split into 3 parts", "part 1 of 3", "part 2 of 3",
                         "part 3 of 3"]


def test_an_embedded_batch_absorbed_tells_nothing(embedded, make_table) -> None:
    duplicates(embedded)
    embedded.write(make_table(acked("j3", "b", "00:07")))
    assert told_while(embedded, lambda: duplicates(embedded)) == []


def test_a_batch_absorbed_tells_nothing(chdb, make_table) -> None:
    derived.ensure(chdb)
    chdb.write(make_table(acked("j3", "b", "00:07")))
    assert told_while(chdb, lambda: derived.ensure(chdb)) == []


def test_a_rebuild_tells_its_steps(chdb) -> None:
    derived.ensure(chdb)
    told = told_while(chdb, lambda: derived.rebuild(chdb))
    assert told and told[-1].finished


def test_a_listener_that_fails_does_not_stop_the_build(chdb) -> None:
    def broken(progress: BuildProgress) -> None:
        raise RuntimeError("display gone")

    with derived.following_builds(chdb, broken):
        found = duplicates(chdb)
    assert list(found["key"]) == ["a"]


def test_a_page_stops_listening_when_its_block_ends(chdb) -> None:
    told_while(chdb, lambda: derived.ensure(chdb))
    assert derived.builds(chdb).listeners == []


def test_the_describing_line_names_the_step_and_how_far_the_build_is() -> None:
    progress = BuildProgress(steps_total=30, steps_done=4, step="derived_executions")
    assert progress.describe().startswith(
        "building the derived tables from nothing: step 5 of 30 (derived_executions), ")
    progress.finished = True
    assert progress.describe().startswith("built the derived tables from nothing: 30 steps in ")


def _chdb_folder(tmp_path: Path, make_table) -> str:  # type: ignore[no-untyped-def]
    """A chDB store with one duplicated key, closed (the CLI opens its own)."""
    store = ChdbStore(str(tmp_path / "cli"))
    try:
        store.write(make_table(acked("j1", "a") + acked("j2", "a", "00:05")))
    finally:
        store.close()
    return str(tmp_path / "cli")


def test_the_cli_names_the_steps_of_a_build_that_runs_long(
    tmp_path: Path, make_table, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _chdb_folder(tmp_path, make_table)
    monkeypatch.setattr(options, "BUILD_NOTE_SECONDS", 0.0)  # every build runs "long"
    result = CliRunner().invoke(main, ["--store", f"chdb://{folder}", "duplicates",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "derived tables" in line]
    assert lines[0].startswith("building the derived tables from nothing: step 1 of ")
    assert lines[-1].startswith("built the derived tables from nothing: ")


def test_the_cli_says_nothing_of_a_quick_build(tmp_path: Path, make_table) -> None:
    folder = _chdb_folder(tmp_path, make_table)
    result = CliRunner().invoke(main, ["--store", f"chdb://{folder}", "duplicates",
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "derived tables" not in result.stderr


def test_metrics_count_the_steps_left_of_a_build(chdb) -> None:
    metrics = AlertMetrics()
    metrics.follow_builds(chdb)
    left_at_first_step: list[float | None] = []

    def look(progress: BuildProgress) -> None:
        if progress.steps_done == 0 and not progress.finished:
            left_at_first_step.append(
                metrics.registry.get_sample_value("dupescope_derived_build_steps_left"))

    with derived.following_builds(chdb, look):
        derived.ensure(chdb)
    total = derived.builds(chdb).last.steps_total
    assert left_at_first_step == [total]
    assert metrics.registry.get_sample_value("dupescope_derived_build_steps_left") == 0
    assert metrics.registry.get_sample_value("dupescope_derived_build_seconds") > 0


def test_the_dashboard_is_told_the_build_a_page_waits_for_once_a_snapshot(
    tmp_path: Path, make_table
) -> None:
    from dashboard import source

    url = f"chdb://{_chdb_folder(tmp_path, make_table)}"
    first: list[BuildProgress] = []
    again: list[BuildProgress] = []
    try:
        snap = source.snapshot(url)
        source.derived(url, snap, first.append)
        source.derived(url, snap, again.append)
        listeners = source.with_store(url, lambda store: list(derived.builds(store).listeners))
    finally:
        source.close(url)
    assert first and first[-1].finished
    assert again == []  # the same snapshot is not derived again
    assert listeners == []  # the page stops listening once its build is done
