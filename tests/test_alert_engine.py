"""Rule evaluation on inline contract events; the same answers on DuckDB and chDB."""

from __future__ import annotations

from dataclasses import replace

from forensics_cases import ev, locked, run

from alerts import evaluate, load_rules
from alerts.ids import alert_id


def _fired(store, make_table, events, rules=None) -> dict[str, list]:
    store.write(make_table(events))
    found: dict[str, list] = {}
    for alert in evaluate(store, rules or load_rules()):
        found.setdefault(alert.rule, []).append(alert)
    return found


def test_overrun_with_another_owner_is_critical(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])
    events += locked("j1", 2, "w2", "o2", "00:12", 10_000, [("00:13", "ack")])
    fired = _fired(store, make_table, events)
    [alert] = fired["lock_expired_while_running"]
    assert alert.id == alert_id("lock_expired_while_running", "j1", 1, "lock:acct-1", "o1")
    assert (alert.severity, alert.overlapped_by, alert.overrun_ms) == ("critical", "o2", 5000.0)
    assert alert.key == "j1" and alert.job_type == "billing.charge"
    assert alert.expired_at.isoformat() == "2025-11-30T12:00:10+00:00"


def test_overrun_alone_is_a_warning(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])
    [alert] = _fired(store, make_table, events)["lock_expired_while_running"]
    assert (alert.severity, alert.overlapped_by) == ("warning", None)


def test_a_lock_renewed_in_time_fires_nothing(store, make_table) -> None:
    steps = [("00:08", "lock_renew"), ("00:15", "side_effect"), ("00:15", "lock_release"),
             ("00:16", "ack")]
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000, steps)
    assert _fired(store, make_table, events) == {}


def test_min_overrun_and_disabled_rules_are_respected(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])
    rules = load_rules()
    headline = rules["lock_expired_while_running"]
    rules["lock_expired_while_running"] = replace(
        headline, params={**headline.params, "min_overrun_ms": 6_000}
    )
    assert "lock_expired_while_running" not in _fired(store, make_table, events, rules)
    rules["lock_expired_while_running"] = replace(headline, enabled=False)
    assert evaluate(store, rules) == []
    stale = rules["stale_owner_write"]
    rules["stale_owner_write"] = replace(stale, params={"only_when_taken": False})
    [alert] = evaluate(store, rules)
    assert (alert.rule, alert.event, alert.overlapped_by) == ("stale_owner_write", "ack", None)


def test_a_side_effect_run_twice_is_a_harmful_duplicate(store, make_table) -> None:
    key = {"idempotency_key": "inv-1"}
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **key)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")], **key)
    [alert] = _fired(store, make_table, events)["harmful_duplicate"]
    assert (alert.key, alert.severity) == ("inv-1", "critical")
    assert alert.id == alert_id("harmful_duplicate", "inv-1")
    assert alert.evidence["cause"] == "visibility_timeout"


def test_a_duplicate_of_unknown_outcome_fires_no_harmful_duplicate(store, make_table) -> None:
    # Two runs nobody reported the effect of (a zero-code source): not called harmful.
    events = run("j1", None, "w1", "00:00", [("00:40", "ack")])
    events += run("j1", None, "w2", "00:31", [("00:33", "ack")])
    assert _fired(store, make_table, events).get("harmful_duplicate", []) == []


def test_split_brain_is_one_alert_per_pair(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 30_000, [("00:10", "ack")])
    events += locked("j2", 1, "w2", "o2", "00:05", 30_000, [("00:08", "ack")])
    [alert] = _fired(store, make_table, events)["split_brain"]
    assert {alert.lock_owner, alert.overlapped_by} == {"o1", "o2"}
    assert alert.lock_key == "lock:acct-1"


def test_p99_near_the_lock_ttl(store, make_table) -> None:
    events = []
    for n in range(5):
        events += locked(
            f"j{n}", 1, "w1", f"o{n}", f"0{n}:00", 10_000,
            [(f"0{n}:09", "lock_release"), (f"0{n}:09", "ack")], lock_key=f"lock:{n}",
        )
    fired = _fired(store, make_table, events)
    [alert] = fired["duration_near_lock_ttl"]
    assert alert.job_type == "billing.charge" and alert.key is None
    assert alert.id == alert_id("duration_near_lock_ttl", "billing.charge", 10_000)
    assert "duration_near_visibility_timeout" not in fired  # 9 s of 30 s


def test_redelivery_storm_uses_its_thresholds(store, make_table, tmp_path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("[redelivery_storm]\nmin_redeliveries = 3\nwindow_seconds = 60\n")
    events = [ev("00:00", "deliver", f"j{n}", delivery_attempt=1, worker_id="w") for n in range(3)]
    events += [ev("00:10", "deliver", f"j{n}", delivery_attempt=2, worker_id="w") for n in range(3)]
    fired = _fired(store, make_table, events, load_rules(path))
    [alert] = fired["redelivery_storm"]
    assert alert.evidence["redeliveries"] == 3
    # The same batch once more: repeats of an event count once, the id is unchanged.
    store.write(make_table(events))
    again = [a for a in evaluate(store, load_rules(path)) if a.rule == "redelivery_storm"]
    assert [a.id for a in again] == [alert.id]


def test_the_alerts_command_uses_the_rules_file(tmp_path, make_table) -> None:
    import orjson
    from click.testing import CliRunner

    from dupescope.cli import main
    from store.embedded import EmbeddedStore

    folder = tmp_path / "store"
    EmbeddedStore(folder).write(
        make_table(locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")]))
    )
    rules = tmp_path / "rules.toml"
    rules.write_text("[lock_expired_while_running]\nseverity = 'info'\n")
    args = ["alerts", "--store", str(folder), "--format", "json", "--rules", str(rules)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    [row] = orjson.loads(result.output)
    assert (row["rule"], row["severity"], row["overrun_ms"]) == (
        "lock_expired_while_running", "info", 5000.0
    )
    rules.write_text("[lock_expired_while_running]\nenabled = false\n")
    assert CliRunner().invoke(main, args).output.strip() == "[]"
