"""The forensic commands as other tools see them: JSON arrays with the contract's rows."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner
from forensics_cases import locked, run

import sample_data
from alerts.ids import alert_id
from derive import catalogue
from dupescope.cli import main
from dupescope.output import records
from queries import duplicates
from store.embedded import EmbeddedStore

KEY = {"idempotency_key": "inv-1"}


def _store_with(tmp_path, make_table, events) -> str:
    folder = tmp_path / "store"
    EmbeddedStore(folder).write(make_table(events))
    return str(folder)


def _json(args: list[str]) -> list[dict]:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.output)


def test_duplicates_json_rows_hold_the_contract_fields(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **KEY)
    rows = _json(["duplicates", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"])
    assert rows == [
        {
            "key": "inv-1",
            "job_type": "billing.charge",
            "queue": None,
            "executions": 2,
            "side_effects": 2,
            "harmful": True,
            "outcome": "harmful",
            "cause": "visibility_timeout",
            "causes": ["visibility_timeout"],
            "job_ids": ["j1"],
            "first_ts": "2025-11-30T12:00:00.000000Z",
            "last_ts": "2025-11-30T12:00:40.000000Z",
            "lock_expired_while_running": False,
            "overlapped": False,
            "split_brain": False,
        }
    ]


def test_duplicates_filters_reach_the_query(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY)
    events += run("j1", 2, "w2", "00:40", [("00:41", "ack")], **KEY)
    store = _store_with(tmp_path, make_table, events)
    assert _json(["duplicates", "--store", store, "--format", "json", "--job-type", "x"]) == []
    assert _json(["duplicates", "--store", store, "--format", "json",
                  "--since", "2025-11-30T12:00:30Z"]) == []
    assert len(_json(["duplicates", "--store", store, "--format", "json",
                      "--until", "2025-11-30T13:00:00Z"])) == 1


def test_alerts_json_names_an_expired_lock_and_who_took_it(tmp_path, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000,
                    [("00:15", "side_effect"), ("00:16", "ack")])
    events += locked("j1", 2, "w2", "o2", "00:12", 10_000,
                     [("00:13", "idempotency_hit"), ("00:14", "lock_release"), ("00:14", "ack")])
    rows = _json(["alerts", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"])
    overrun = [r for r in rows if r["rule"] == "lock_expired_while_running"]
    assert overrun == [
        {
            "rule": "lock_expired_while_running",
            "key": "j1",
            "job_id": "j1",
            "delivery_attempt": 1,
            "lock_key": "lock:acct-1",
            "lock_owner": "o1",
            "expired_at": "2025-11-30T12:00:10.000000Z",
            "execution_end": "2025-11-30T12:00:16.000000Z",
            "overrun_ms": 6000.0,
            "overlapped_by": "o2",
            "worker_id": "w1",
            "job_type": "billing.charge",
            "event": None,
            "ts": None,
            "severity": "critical",
            "summary": "lock lock:acct-1 held by o1 expired 6000 ms before job j1 (attempt 1) "
            "finished; o2 acquired it meanwhile",
            "alert_id": alert_id("lock_expired_while_running", "j1", 1, "lock:acct-1", "o1"),
            "incident_ts": "2025-11-30T12:00:16.000000Z",
        }
    ]
    assert {r["rule"] for r in rows} == {"lock_expired_while_running", "stale_owner_write"}


def test_alerts_on_a_clean_store_is_an_empty_array(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "ack")])
    assert _json(["alerts", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"]) == []


def test_stats_json_rows_name_their_checklist_item(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "lock_contended"), ("00:03", "ack")])
    rows = _json(["stats", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json", "--item", "lock_contention"])
    assert [(r["item"], r["job_type"], r["lock_contended"]) for r in rows] == [
        ("lock_contention", "billing.charge", 1)]


def test_lint_json_names_a_visibility_timeout_below_p99(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:45", "side_effect"), ("00:50", "ack")], **KEY)
    rows = _json(["lint", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"])
    assert [r["setting"] for r in rows] == ["visibility_timeout_ms"]
    assert rows[0]["job_type"] == "billing.charge"
    assert "p99 50000 ms > visibility_timeout_ms 30000 ms" in rows[0]["evidence"]


def test_a_bad_time_is_a_usage_error(tmp_path, make_table) -> None:
    store = _store_with(tmp_path, make_table, run("j1", 1, "w1", "00:00", []))
    result = CliRunner().invoke(main, ["duplicates", "--store", store, "--since", "soon"])
    assert result.exit_code == 2
    assert "not a time" in result.output


HARMFUL = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY) + run(
    "j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY
)
HARMFUL_VERDICT = {
    "text": "Delivered twice because the first worker (w1) went silent after its side "
    "effect; the second execution ran the effect again: harmful.",
    "harmful": True,
    "cause": "worker_crash",
    "causes": ["worker_crash"],
    "job_type": "billing.charge",
    "cause_line": "billing.charge · cause worker_crash (all that apply: worker_crash)",
    "outcome": "harmful",
}


def test_timeline_table_opens_with_the_verdict_the_page_shows(tmp_path, make_table) -> None:
    result = CliRunner().invoke(
        main, ["timeline", "inv-1", "--store", _store_with(tmp_path, make_table, HARMFUL)]
    )
    assert result.exit_code == 0, result.output
    verdict, cause, blank, header, *rows = result.output.splitlines()
    assert verdict == HARMFUL_VERDICT["text"]
    assert cause == HARMFUL_VERDICT["cause_line"]
    assert blank == ""
    assert header.split()[:3] == ["ts", "execution", "event"]
    assert len(rows) == len(HARMFUL)


def test_timeline_json_rows_keep_their_fields_and_carry_the_verdict(tmp_path, make_table) -> None:
    rows = _json(["timeline", "inv-1", "--store", _store_with(tmp_path, make_table, HARMFUL),
                  "--format", "json"])
    assert [r["event"] for r in rows] == [e["event"] for e in HARMFUL]
    assert rows[0]["ts"] == "2025-11-30T12:00:00.000000Z"
    assert {"execution", "job_id", "worker_id", "event_uid"} <= set(rows[0])
    assert all(r["verdict"] == HARMFUL_VERDICT for r in rows)


def test_timeline_json_of_a_clean_key_says_it_is_no_duplicate(tmp_path, make_table) -> None:
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
    rows = _json(["timeline", "j1", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"])
    assert rows[0]["verdict"] == {
        "text": "Ran once and ran its side effect: not a duplicate.",
        "harmful": None,
        "cause": None,
        "causes": [],
        "job_type": None,
        "cause_line": None,
        "outcome": None,
    }


def test_timeline_without_the_verdict_reads_the_key_alone(tmp_path, make_table) -> None:
    folder = _store_with(tmp_path, make_table, HARMFUL)
    result = CliRunner().invoke(main, ["timeline", "inv-1", "--store", folder, "--no-verdict"])
    assert result.exit_code == 0, result.output
    header, *rows = result.output.splitlines()
    assert header.split()[:3] == ["ts", "execution", "event"]
    assert len(rows) == len(HARMFUL)
    assert not (Path(folder) / "derived").exists()  # no derived table was built
    rows = _json(["timeline", "inv-1", "--store", folder, "--no-verdict", "--format", "json"])
    assert "verdict" not in rows[0]


def test_rebuild_builds_the_derived_tables_and_says_so(tmp_path, make_table) -> None:
    folder = _store_with(tmp_path, make_table, HARMFUL)
    result = CliRunner().invoke(main, ["rebuild", "--store", folder])
    assert result.exit_code == 0, result.output
    assert "rebuilt in" in result.output
    assert list((Path(folder) / "derived").glob("derived_executions-*.parquet"))


def test_rebuild_shows_each_step_as_it_ends(tmp_path, make_table) -> None:
    folder = _store_with(tmp_path, make_table, HARMFUL)
    result = CliRunner().invoke(main, ["rebuild", "--store", folder])
    assert result.exit_code == 0, result.output
    steps = [line.split(" s  ", 1)[1] for line in result.output.splitlines() if " s  " in line]
    shown = " | ".join(steps)
    assert all(f"derived {table.name} in" in shown for table in catalogue.chained("duckdb"))
    # Written to disk:
    assert all(f"kept {table.name} in" in shown for table in catalogue.kept("duckdb"))


def test_rebuild_of_a_store_that_does_not_exist_is_an_error(tmp_path) -> None:
    result = CliRunner().invoke(main, ["rebuild", "--store", str(tmp_path / "typo")])
    assert result.exit_code != 0
    assert "typo" in result.output


def test_duplicates_json_prints_each_row_as_the_frame_holds_it(tmp_path, make_table) -> None:
    """The JSON printed for every duplicate at once is the rows `duplicates` gives, as
    every other command prints its frames."""
    workload = sample_data.generate(seed=3, target_events=3000, hours=0.5)
    folder = _store_with(tmp_path, make_table,
                         [orjson.loads(line) for line in workload.jsonl_bytes().splitlines()])
    expected = records(duplicates(EmbeddedStore(folder)))
    assert len(expected) > 10
    assert _json(["duplicates", "--store", folder, "--format", "json"]) == expected


def test_duplicates_json_says_an_outcome_no_run_reported_is_unknown(tmp_path, make_table) -> None:
    events = run("j1", None, "w1", "00:00", [("00:40", "ack")])
    events += run("j1", None, "w2", "00:31", [("00:33", "ack")])
    rows = _json(["duplicates", "--store", _store_with(tmp_path, make_table, events),
                  "--format", "json"])
    assert [(r["key"], r["harmful"], r["outcome"]) for r in rows] == [("j1", None, "unknown")]
