"""The forensic commands as other tools see them: JSON arrays with the contract's rows."""

from __future__ import annotations

import orjson
from click.testing import CliRunner
from forensics_cases import locked, run

from dupescope.cli import main
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
