"""Rules files and alert ids: the parts of alerting that need no events."""

from __future__ import annotations

import pytest

from alerts.ids import alert_id
from alerts.rules import DEFAULT_RULES_PATH, RulesError, load_rules

RULES = {
    "lock_expired_while_running",
    "harmful_duplicate",
    "stale_owner_write",
    "split_brain",
    "duration_near_lock_ttl",
    "duration_near_visibility_timeout",
    "redelivery_storm",
}


def test_defaults_ship_every_rule_enabled() -> None:
    rules = load_rules()
    assert set(rules) == RULES
    assert all(rule.enabled for rule in rules.values())
    headline = rules["lock_expired_while_running"]
    assert (headline.severity, headline.get("severity_overlapped")) == ("warning", "critical")
    # The defaults are the rules file the package ships, read as a user's file would be.
    assert DEFAULT_RULES_PATH.is_file() and set(load_rules(DEFAULT_RULES_PATH)) == RULES


def test_a_user_file_changes_only_what_it_names(tmp_path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        "[duration_near_lock_ttl]\nshare = 0.5\n\n[redelivery_storm]\nenabled = false\n"
    )
    rules = load_rules(path)
    assert rules["duration_near_lock_ttl"].get("share") == 0.5
    assert rules["duration_near_lock_ttl"].get("min_executions") == 5
    assert rules["duration_near_lock_ttl"].severity == "warning"
    assert not rules["redelivery_storm"].enabled
    assert rules["split_brain"].enabled


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[no_such_rule]\nenabled = true\n", "unknown rule 'no_such_rule'"),
        ("[split_brain]\nthreshold = 3\n", "unknown key(s) threshold"),
        ("[split_brain]\nseverity = 'loud'\n", "severity = 'loud'"),
        ("[duration_near_lock_ttl]\nshare = 1.5\n", "share must be in (0, 1]"),
        ("[redelivery_storm]\nmin_redeliveries = -1\n", "must be a number >= 0"),
        ("[split_brain\n", "not valid TOML"),
        ("[stale_owner_write]\nonly_when_taken = 1\n", "must be true or false"),
    ],
)
def test_bad_rules_files_say_what_is_wrong(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(RulesError, match="rules.toml") as caught:
        load_rules(path)
    assert message in str(caught.value)


def test_alert_ids_depend_on_the_incident_only() -> None:
    one = alert_id("lock_expired_while_running", "j1", 1, "lock:a", "o1")
    assert one == alert_id("lock_expired_while_running", "j1", 1.0, "lock:a", "o1")
    assert one != alert_id("lock_expired_while_running", "j1", 2, "lock:a", "o1")
    assert one != alert_id("split_brain", "j1", 1, "lock:a", "o1")
    assert alert_id("r", None, "x") == alert_id("r", float("nan"), "x")
    assert len(one) == 32
