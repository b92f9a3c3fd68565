"""The incident report: one key's forensics (queries/key_report.py), or an alert's keys,
as one self-contained file to share: Markdown or HTML. The command line writes it
(`dupescope report`) and the timeline page offers it for download.

Every value from the store is escaped for the medium (a key full of markup is shown as
text); the HTML carries no script, its chart is an SVG inside a data: URI, and its
Content-Security-Policy forbids fetching anything, so it opens offline and asks no host.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dashboard.report_chart import timeline_svg
from queries.key_report import KeyReport

EXECUTION_COLUMNS = ["execution", "job_id", "worker_id", "delivery_attempt", "start", "end",
                     "duration_ms", "side_effect", "absorbed_by", "outcome", "reason",
                     "visibility_timeout_ms", "lock_key", "lock_owner"]
RELATED_COLUMNS = ["key", "shares", "value", "runs"]
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass(frozen=True)
class Document:
    """A report: a title, facts about what it covers (an alert's, say), and key sections."""

    title: str
    facts: list[tuple[str, Any]] = field(default_factory=list)
    keys: Sequence[KeyReport] = ()


def text(value: Any) -> str:
    """A cell's plain text: times as RFC 3339 UTC, numbers trimmed, missing as ''."""
    if value is None or (not isinstance(value, list | tuple | dict) and pd.isna(value)):
        return ""
    if isinstance(value, pd.Timestamp):
        stamp = value.tz_convert("UTC") if value.tzinfo else value
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float):
        return f"{value:.0f}" if value == int(value) else f"{value:.1f}"
    if isinstance(value, list | tuple):
        return ", ".join(text(v) for v in value)
    return str(value)


# ---- Markdown --------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def md(value: Any) -> str:
    """Text that Markdown shows as it is: markup characters escaped, HTML's too."""
    plain = " ".join(text(value).split())
    plain = plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", plain)


def _md_table(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    shown = [c for c in columns if c in frame.columns]
    if frame.empty:
        return ["(none)", ""]
    lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    for row in frame[shown].to_dict(orient="records"):
        lines.append("| " + " | ".join(md(row[c]) for c in shown) + " |")
    return [*lines, ""]


def _svg_uri(report: KeyReport) -> str:
    svg = timeline_svg(report.forensics.timeline, report.forensics.executions)
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def markdown(document: Document) -> str:
    out = [f"# {md(document.title)}", ""]
    out += [f"- **{md(name)}**: {md(value)}" for name, value in document.facts]
    for report in document.keys:
        out += ["", *_md_key(report)]
    return "\n".join(out) + "\n"


def _md_key(report: KeyReport) -> list[str]:
    f = report.forensics
    out = [f"## Key {md(report.key)}", "", md(f.verdict.text), ""]
    if f.verdict.cause_line:
        out += [md(f.verdict.cause_line), ""]
    out += [f"![timeline of {md(report.key)}]({_svg_uri(report)})", ""]
    out += ["### Executions", "", *_md_table(f.executions, EXECUTION_COLUMNS)]
    out += ["### Side effects", "", *_md_table(report.side_effects, list(report.side_effects))]
    out += ["### Locks", "", *_md_table(report.locks, list(report.locks))]
    out += ["### Settings that would have prevented it", ""]
    out += [f"- {md(p.setting)}: {md(p.outcome)}" for p in report.preventions] or [
        "- none of a visibility timeout, a lock TTL or a heartbeat changes this key"]
    out += ["", "### Related keys (same job_id, lock_key or resource_key)", "",
            *_md_table(report.related, RELATED_COLUMNS)]
    return out


# ---- HTML ------------------------------------------------------------------------------

def h(value: Any) -> str:
    return html.escape(text(value), quote=True)


def _html_table(frame: pd.DataFrame, columns: list[str]) -> str:
    shown = [c for c in columns if c in frame.columns]
    if frame.empty:
        return "<p>(none)</p>"
    head = "".join(f"<th>{h(c)}</th>" for c in shown)
    rows = "".join(
        "<tr>" + "".join(f"<td>{h(row[c])}</td>" for c in shown) + "</tr>"
        for row in frame[shown].to_dict(orient="records"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


STYLE = """body{font-family:sans-serif;margin:2em;max-width:75em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em;display:block;overflow-x:auto}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.verdict{font-size:1.1em;padding:.6em;border-left:4px solid #d62728;
background:#fdf3f3}.cause{color:#555}img{max-width:100%;border:1px solid #eee}
h2{border-top:2px solid #ddd;padding-top:1em;word-break:break-all}"""


def page(document: Document) -> str:
    facts = "".join(f"<li><b>{h(n)}</b>: {h(v)}</li>" for n, v in document.facts)
    keys = "".join(_html_key(r) for r in document.keys)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
        f"<title>{h(document.title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{h(document.title)}</h1>"
        + (f"<ul>{facts}</ul>" if facts else "") + keys + "</body></html>\n")


def _html_key(report: KeyReport) -> str:
    f = report.forensics
    preventions = "".join(
        f"<li><b>{h(p.setting)}</b>: {h(p.outcome)}</li>" for p in report.preventions
    ) or "<li>none of a visibility timeout, a lock TTL or a heartbeat changes this key</li>"
    cause = f"<p class=\"cause\">{h(f.verdict.cause_line)}</p>" if f.verdict.cause_line else ""
    return (
        f"<section><h2>Key {h(report.key)}</h2>"
        f"<p class=\"verdict\">{h(f.verdict.text)}</p>{cause}"
        f"<img alt=\"timeline of {h(report.key)}\" src=\"{_svg_uri(report)}\">"
        f"<h3>Executions</h3>{_html_table(f.executions, EXECUTION_COLUMNS)}"
        f"<h3>Side effects</h3>{_html_table(report.side_effects, list(report.side_effects))}"
        f"<h3>Locks</h3>{_html_table(report.locks, list(report.locks))}"
        f"<h3>Settings that would have prevented it</h3><ul>{preventions}</ul>"
        "<h3>Related keys (same job_id, lock_key or resource_key)</h3>"
        f"{_html_table(report.related, RELATED_COLUMNS)}</section>")


def render(document: Document, fmt: str) -> str:
    """The document as `md` or `html`."""
    if fmt == "md":
        return markdown(document)
    if fmt == "html":
        return page(document)
    raise ValueError(f"no report format {fmt!r}: md or html")


#: What an incident report says of its alert, in this order, where the alert has it.
ALERT_FACTS = ("alert_id", "rule", "severity", "summary", "job_type", "job_id", "lock_key",
               "lock_owner", "overlapped_by", "overrun_ms", "incident_ts")


def key_document(store: Any, key: str) -> Document:
    """The report of one key (an idempotency key or job_id)."""
    from queries.key_report import key_report

    return Document(f"Incident report: {key}", [], [key_report(store, key)])


def incident_document(store: Any, alert_id: str) -> Document | None:
    """The report of an alert: its facts, then every key it names; None for no such
    alert."""
    from alerts.incident import find_alert, named_keys
    from queries.key_report import key_report

    alert = find_alert(store, alert_id)
    if alert is None:
        return None
    facts = [(name, alert.get(name)) for name in ALERT_FACTS
             if alert.get(name) is not None and not pd.isna(alert.get(name))]
    return Document(f"Incident {alert_id}", facts,
                    [key_report(store, k) for k in named_keys(store, alert)])
