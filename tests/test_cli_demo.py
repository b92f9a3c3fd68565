"""`dupescope demo`: the shipped sample loads, and its summary is the model's truth."""

import json
from collections import Counter

from click.testing import CliRunner

import sample_data
from dupescope.cli import main


def test_demo_loads_the_sample_and_summarises_it_as_the_truth_says(tmp_path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["demo", "--store", str(store), "--no-dashboard"])
    assert result.exit_code == 0, result.output
    truth = json.loads(sample_data.SAMPLE_TRUTH_PATH.read_text())
    by_cause = Counter(d["cause"] for d in truth["duplicates"])
    harmful = Counter(d["cause"] for d in truth["duplicates"] if d["outcome"] == "harmful")
    lines = {
        line.split()[0]: line.split()[1:]
        for line in result.stdout.splitlines()
        if line.split() and line.split()[0] in by_cause
    }
    assert {cause: (int(row[0]), int(row[1])) for cause, row in lines.items()} == {
        cause: (count, harmful[cause]) for cause, count in by_cause.items()
    }
    assert "dupescope timeline " in result.stdout


def test_running_the_demo_twice_changes_no_answer(tmp_path) -> None:
    args = ["demo", "--store", str(tmp_path / "store"), "--no-dashboard"]
    first = CliRunner().invoke(main, args)
    second = CliRunner().invoke(main, args)
    assert first.stdout == second.stdout


def test_demo_generates_a_fresh_workload_on_request(tmp_path) -> None:
    store = tmp_path / "fresh"
    result = CliRunner().invoke(
        main, ["demo", "--events", "3000", "--seed", "11", "--store", str(store), "--no-dashboard"]
    )
    assert result.exit_code == 0, result.output
    assert "Duplicate executions by cause" in result.stdout
    assert any(store.glob("events/day=*/*.parquet"))


def test_demo_takes_the_dashboards_port_option_and_refuses_a_port_out_of_range(tmp_path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["demo", "--store", str(store), "--port", "70000"])
    assert result.exit_code == 2
    assert "'--port'" in result.output
    assert not store.exists()  # refused before anything was loaded
