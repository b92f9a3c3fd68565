"""What a receiver gets: a JSON body naming the key, or a Slack-compatible `{"text": ...}`.

Bodies are built from the stored alert document, so a delivery retried after a restart
carries the same content as the first attempt.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from alerts.model import CONTRACT_COLUMNS

FORMATS = ("json", "slack")

#: The contract's columns below the body's own `rule` and `key`, and the incident's time.
_EVIDENCE_KEYS = (*(c for c in CONTRACT_COLUMNS if c not in ("rule", "key")), "incident_ts")


def timeline_url(dashboard_url: str | None, key: str | None) -> str | None:
    """The dashboard's deep link for a key (`/timeline?key=...`)."""
    if not dashboard_url or not key:
        return None
    return f"{dashboard_url.rstrip('/')}/timeline?key={quote(str(key), safe='')}"


def report_url(dashboard_url: str | None, alert_id: str | None) -> str | None:
    """The dashboard's page of the incident's report (`/report?incident=ID`): the alert,
    the keys it names, each one's timeline, as one file to download."""
    if not dashboard_url or not alert_id:
        return None
    return f"{dashboard_url.rstrip('/')}/report?incident={quote(str(alert_id), safe='')}"


def json_body(doc: dict[str, Any], dashboard_url: str | None) -> dict[str, Any]:
    """The generic webhook body."""
    evidence = {k: doc.get(k) for k in _EVIDENCE_KEYS if doc.get(k) is not None}
    evidence.update(doc.get("evidence") or {})
    return {
        "id": doc["alert_id"],
        "rule": doc["rule"],
        "severity": doc["severity"],
        "key": doc.get("key"),
        "job_type": doc.get("job_type"),
        "summary": doc.get("summary"),
        "evidence": evidence,
        "timeline_url": timeline_url(dashboard_url, doc.get("key")),
        "report_url": report_url(dashboard_url, doc["alert_id"]),
    }


def slack_body(doc: dict[str, Any], dashboard_url: str | None) -> dict[str, Any]:
    """A Slack incoming-webhook body (also understood by Mattermost and similar)."""
    link = timeline_url(dashboard_url, doc.get("key"))
    lines = [
        f"[{doc['severity'].upper()}] {doc['rule']}: {doc.get('summary') or ''}".rstrip(),
        f"key: {doc.get('key')}  job_type: {doc.get('job_type')}  alert: {doc['alert_id']}",
    ]
    if link:
        lines.append(f"<{link}|timeline>")
    report = report_url(dashboard_url, doc["alert_id"])
    if report:
        lines.append(f"<{report}|incident report>")
    return {"text": "\n".join(lines)}


def build(doc: dict[str, Any], fmt: str, dashboard_url: str | None) -> dict[str, Any]:
    if fmt == "slack":
        return slack_body(doc, dashboard_url)
    return json_body(doc, dashboard_url)
