"""`dupescope report`: one key's (or one alert's) forensics as a self-contained file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from conftest import events_to_table
from forensics_cases import locked, run

from dupescope.cli import main
from store.embedded import EmbeddedStore

KEY = "inv-<b>1</b><script>alert(1)</script>"


def story() -> list[dict]:
    """KEY redelivered after 30 s while its first run went on to 40 s, both charging;
    another key, inv-2, took the same lock (lock:acct-1) later on."""
    events = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")],
                 idempotency_key=KEY)
    events += run("j1", 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")],
                  idempotency_key=KEY)
    events += [dict(e, idempotency_key=KEY) for e in locked(
        "j1", 3, "w3", "o1", "00:50", 10_000, [("00:51", "lock_release"), ("00:51", "ack")])]
    events += [dict(e, idempotency_key="inv-2") for e in locked(
        "j2", 1, "w4", "o2", "01:10", 10_000, [("01:11", "lock_release"), ("01:11", "ack")])]
    return events


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("report") / "store"
    store = EmbeddedStore(folder)
    store.write(events_to_table(story()))
    store.close()
    return str(folder)


def report(store_path: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["report", "--store", store_path, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_html_report_escapes_the_key_and_holds_no_script(store_path) -> None:
    page = report(store_path, KEY)
    assert "inv-&lt;b&gt;1&lt;/b&gt;&lt;script&gt;" in page
    assert "<script" not in page.lower() and "<b>1</b>" not in page
    assert "Delivered" in page and "harmful" in page


def test_the_html_report_asks_no_host(store_path) -> None:
    page = report(store_path, KEY)
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/svg+xml;base64,") for s in sources)
    assert "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page


def test_the_report_names_the_setting_that_would_have_prevented_it(store_path) -> None:
    page = report(store_path, KEY, "--format", "md")
    # The third run (after an ack: a broker redelivery) happens whatever the limits.
    assert "visibility timeout 45 s: 1 run(s) fewer, still a duplicate" in page.replace(
        "\\", "")


def test_the_markdown_report_shows_markup_as_text(store_path) -> None:
    page = report(store_path, KEY, "--format", "md")
    assert "## Key inv\\-&lt;b&gt;1&lt;/b&gt;&lt;script&gt;alert\\(1\\)" in page
    assert "](data:image/svg+xml;base64," in page


def test_the_report_lists_the_keys_that_shared_its_lock(store_path) -> None:
    page = report(store_path, KEY, "--format", "md")
    assert "| inv\\-2 | lock\\_key | lock:acct\\-1 | 1 |" in page


def test_the_report_is_written_to_a_file(store_path, tmp_path) -> None:
    out = tmp_path / "incident.html"
    report(store_path, KEY, "-o", str(out))
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_an_incident_report_covers_the_alert_and_its_key(store_path) -> None:
    alerts = CliRunner().invoke(main, ["alerts", "--store", store_path, "--format", "json"])
    alert = next(a for a in orjson.loads(alerts.output) if a["key"] == KEY)
    page = report(store_path, "--incident", alert["alert_id"])
    assert f"Incident {alert['alert_id']}" in page
    assert alert["rule"] in page and "Key inv-&lt;b&gt;1&lt;/b&gt;" in page


def test_an_unknown_alert_is_an_error(store_path) -> None:
    result = CliRunner().invoke(main, ["report", "--store", store_path, "--incident", "nope"])
    assert result.exit_code == 1 and "no alert 'nope'" in result.output


@pytest.mark.browser
def test_the_report_in_chromium_shows_its_text_and_chart_and_asks_nothing(
    store_path, tmp_path: Path
) -> None:
    from dashboard.screenshots import CHROMIUM, browser_page

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: make browser)")
    out = tmp_path / "incident.html"
    report(store_path, KEY, "-o", str(out))
    with browser_page() as page:
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        page.goto(out.as_uri())
        page.wait_for_function("document.images[0] && document.images[0].complete")
        assert page.locator("h2").first.inner_text() == f"Key {KEY}"
        assert "harmful" in page.locator(".verdict").inner_text()
        assert page.evaluate("document.images[0].naturalWidth") > 100
        assert page.locator("script").count() == 0
    assert [u for u in asked if not u.startswith(("file:", "data:"))] == []


def test_the_webhook_body_links_to_the_incident_report() -> None:
    from alerts.payload import json_body, slack_body

    doc = {"alert_id": "a1/b", "rule": "harmful_duplicate", "severity": "critical",
           "key": KEY}
    assert json_body(doc, "http://dash:8501/")["report_url"] == (
        "http://dash:8501/report?incident=a1%2Fb")
    assert "<http://dash:8501/report?incident=a1%2Fb|incident report>" in slack_body(
        doc, "http://dash:8501")["text"]


def test_the_dashboard_shows_an_alerts_report_and_offers_it(store_path, monkeypatch) -> None:
    from dashboard_app import open_page

    monkeypatch.setenv("DUPESCOPE_STORE", store_path)
    alerts = CliRunner().invoke(main, ["alerts", "--store", store_path, "--format", "json"])
    alert = next(a for a in orjson.loads(alerts.output) if a["key"] == KEY)
    app = open_page("report", incident=alert["alert_id"])
    assert not app.exception
    (button,) = app.get("download_button")
    assert button.proto.label == "Download report"
    assert [e.proto.srcdoc for e in app.get("iframe")][0].count("<h2>Key ") == 1


def test_a_lock_incident_reports_both_keys_it_names(serve_events) -> None:
    """j1's lock lapsed at 00:10 while it ran to 00:15; j2 (another key) took it at 00:12."""
    serve_events(
        locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "ack")])
        + locked("j2", 1, "w2", "o2", "00:12", 10_000, [("00:13", "lock_release"),
                                                        ("00:13", "ack")]))
    alerts = orjson.loads(CliRunner().invoke(main, ["alerts", "--format", "json"]).output)
    overrun = next(a for a in alerts if a["rule"] == "lock_expired_while_running")
    result = CliRunner().invoke(main, ["report", "--incident", overrun["alert_id"],
                                       "--format", "md"])
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.startswith("## Key")] == [
        "## Key j1", "## Key j2"]
    assert "expired 5\\.0 s before the run ended" in result.output


def test_the_report_says_the_same_on_duckdb_and_chdb(store, make_table) -> None:
    from queries.key_report import key_report

    store.write(make_table(story()))
    found = key_report(store, KEY)
    assert found.related.to_dict(orient="records") == [
        {"key": "inv-2", "shares": "lock_key", "value": "lock:acct-1", "runs": 1}]
    assert [(p.setting, p.prevents) for p in found.preventions] == [
        ("visibility timeout 45 s", True),
        ("heartbeat every 3.3 s (renew the lock, extend visibility)", True)]
    assert list(found.locks["verdict"]) == ["valid for the whole run"]
