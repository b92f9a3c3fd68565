"""One detector per rule: a forensic query's rows -> incidents with stable ids.

The forensic questions live in `queries/`; a detector only decides which rows are
incidents under the rule's thresholds, how severe they are, and what names an incident
(the parts of its id). Identity never includes a time of detection or ingestion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import pandas as pd

from alerts.ids import alert_id
from alerts.model import Alert
from alerts.rules import Rule
from store.base import Store

Detector = Callable[..., list[Alert]]


def _value(row: dict[str, Any], name: str) -> Any:
    value = row.get(name)
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _time(value: Any) -> datetime | None:
    if value is None or value is pd.NaT:
        return None
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        return None
    if pd.isna(stamp):
        return None
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.to_pydatetime()


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _rows(frame: pd.DataFrame) -> Iterable[dict[str, Any]]:
    return frame.to_dict(orient="records")


def _evidence(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _value(row, k) for k in row}


def _alert(rule: Rule, ident: str, row: dict[str, Any], summary: str, **fields: Any) -> Alert:
    """An incident of `rule` with the whole row as its evidence (`severity` may differ)."""
    fields.setdefault("severity", rule.severity)
    return Alert(id=ident, rule=rule.name, summary=summary, evidence=_evidence(row), **fields)


def _execution(row: dict[str, Any]) -> dict[str, Any]:
    """Where a lock incident happened: the key, job, attempt, lock and worker of the row."""
    return {
        "key": _value(row, "key"),
        "job_type": _value(row, "job_type"),
        "job_id": _value(row, "job_id"),
        "delivery_attempt": _int(_value(row, "delivery_attempt")),
        "lock_key": _value(row, "lock_key"),
        "lock_owner": _value(row, "lock_owner"),
        "worker_id": _value(row, "worker_id"),
    }


def _forensics(name: str) -> Callable[..., pd.DataFrame]:
    import queries

    return getattr(queries, name)


def lock_expired_while_running(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
    """The headline: an execution outlived its lock; critical when another owner took it."""
    found = []
    for row in _rows(_forensics("lock_overruns")(store, **filters)):
        overrun = _value(row, "overrun_ms")
        if overrun is not None and overrun < rule.get("min_overrun_ms", 0):
            continue
        other = _value(row, "overlapped_by")
        attempt = _int(_value(row, "delivery_attempt"))
        parts = [row.get(k) for k in ("job_id", "delivery_attempt", "lock_key", "lock_owner")]
        severity = rule.get("severity_overlapped", rule.severity) if other else rule.severity
        end = _time(_value(row, "execution_end"))
        summary = (
            f"lock {_value(row, 'lock_key')} held by {_value(row, 'lock_owner')} expired "
            f"{overrun or 0:.0f} ms before job {_value(row, 'job_id')} "
            f"(attempt {attempt}) finished" + (f"; {other} acquired it meanwhile" if other else "")
        )
        found.append(
            _alert(
                rule,
                alert_id(rule.name, *parts),
                row,
                summary,
                severity=severity,
                **_execution(row),
                expired_at=_time(_value(row, "expired_at")),
                execution_end=end,
                overrun_ms=None if overrun is None else float(overrun),
                overlapped_by=other,
                incident_ts=end,
            )
        )
    return found


def harmful_duplicate(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
    """A key whose side effect ran more than once: the duplicate the business feels (never
    one of unknown outcome, which no run's events can call harmful)."""
    found = []
    for row in _rows(_forensics("duplicates")(store, **filters)):
        effects = _value(row, "side_effects") or 0
        harmful = _value(row, "outcome") == "harmful" if "outcome" in row else _value(
            row, "harmful")
        if not harmful or effects < rule.get("min_side_effects", 2):
            continue
        key = _value(row, "key")
        summary = (
            f"key {key} ran its side effect {effects} times in "
            f"{_value(row, 'executions')} executions (cause: {_value(row, 'cause')})"
        )
        found.append(
            _alert(
                rule,
                alert_id(rule.name, key),
                row,
                summary,
                key=key,
                job_type=_value(row, "job_type"),
                incident_ts=_time(_value(row, "last_ts")),
            )
        )
    return found


def stale_owner_write(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
    """Writes by an owner whose lock had expired or passed on: one alert per execution,
    with its first such write as the evidence."""
    found: dict[str, Alert] = {}
    frame = _forensics("stale_owner_writes")(store, **filters)
    if not frame.empty:
        frame = frame.sort_values("ts", kind="stable")
    for row in _rows(frame):
        parts = [row.get(k) for k in ("job_id", "delivery_attempt", "lock_key", "lock_owner")]
        ident = alert_id(rule.name, *parts)
        if ident in found:
            continue
        taken_by = _value(row, "taken_by")
        if taken_by is None and rule.get("only_when_taken", True):
            continue
        when = _time(_value(row, "ts"))
        summary = (
            f"{_value(row, 'lock_owner')} ran {_value(row, 'event')} for job "
            f"{_value(row, 'job_id')} after lock {_value(row, 'lock_key')} "
            + (f"passed to {taken_by}" if taken_by else "expired")
        )
        found[ident] = _alert(
            rule,
            ident,
            row,
            summary,
            **_execution(row),
            expired_at=_time(_value(row, "expired_at")),
            overlapped_by=taken_by,
            event=_value(row, "event"),
            ts=when,
            incident_ts=when,
        )
    return list(found.values())


def split_brain(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
    """Two owners holding unexpired locks on one lock_key at once: one alert per pair
    (the query reports each overlap from both sides)."""
    found: dict[str, Alert] = {}
    for row in _rows(_forensics("split_brains")(store, **filters)):
        owner = _value(row, "lock_owner")
        other = _value(row, "other_owner")
        sides = sorted(
            [
                f"{owner or ''}/{_value(row, 'job_id') or ''}",
                f"{other or ''}/{_value(row, 'other_job_id') or ''}",
            ]
        )
        ident = alert_id(rule.name, _value(row, "lock_key"), *sides)
        if ident in found:
            continue
        summary = (
            f"{owner} and {other} both held lock {_value(row, 'lock_key')} for "
            f"{_value(row, 'overlap_ms') or 0:.0f} ms"
        )
        found[ident] = _alert(
            rule,
            ident,
            row,
            summary,
            **_execution(row),
            overlapped_by=other,
            ts=_time(_value(row, "overlap_from")),
            incident_ts=_time(_value(row, "overlap_until")),
        )
    return list(found.values())


def _near_setting(setting: str, label: str) -> Detector:
    def detect(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
        found = []
        share = float(rule.get("share", 0.8))
        for row in _rows(_forensics("durations")(store, **filters)):
            p99 = _value(row, "p99_ms")
            limit = _value(row, setting)
            count = _value(row, "executions") or 0
            if p99 is None or not limit or count < rule.get("min_executions", 0):
                continue
            if p99 < share * limit:
                continue
            job_type = _value(row, "job_type")
            summary = (
                f"{job_type}: p99 {p99:.0f} ms is {p99 / limit:.0%} of the "
                f"{label} ({int(limit)} ms)"
            )
            # A changed setting is a new situation, so it is part of the identity.
            ident = alert_id(rule.name, job_type, int(limit))
            found.append(_alert(rule, ident, row, summary, job_type=job_type))
        return found

    return detect


def redelivery_storm(store: Store, rule: Rule, **filters: Any) -> list[Alert]:
    """Many redeliveries of one job type in a tumbling window of event time."""
    from queries.derived import query

    window = int(rule.get("window_seconds", 300))
    frame = query(
        store,
        "alert_redeliveries",
        window_s=window,
        min_count=int(rule.get("min_redeliveries", 20)),
    )
    if filters.get("job_type") is not None:
        frame = frame[frame["job_type"] == filters["job_type"]]
    found = []
    for row in _rows(frame):
        job_type = _value(row, "job_type")
        bucket = int(row["bucket"])
        summary = (
            f"{job_type}: {row['redeliveries']} redeliveries of {row['jobs']} jobs "
            f"within {window} s"
        )
        found.append(
            _alert(
                rule,
                alert_id(rule.name, job_type, window, bucket),
                row,
                summary,
                job_type=job_type,
                incident_ts=_time(_value(row, "last_ts")),
            )
        )
    return found


DETECTORS: dict[str, Detector] = {
    "lock_expired_while_running": lock_expired_while_running,
    "harmful_duplicate": harmful_duplicate,
    "stale_owner_write": stale_owner_write,
    "split_brain": split_brain,
    "duration_near_lock_ttl": _near_setting("lock_ttl_ms", "lock TTL"),
    "duration_near_visibility_timeout": _near_setting(
        "visibility_timeout_ms", "visibility timeout"
    ),
    "redelivery_storm": redelivery_storm,
}
