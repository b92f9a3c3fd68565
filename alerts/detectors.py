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

Detector = Callable[[Store, Rule], list[Alert]]


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


def _forensics(name: str) -> Callable[..., pd.DataFrame]:
    import queries

    return getattr(queries, name)


def lock_expired_while_running(store: Store, rule: Rule) -> list[Alert]:
    """The headline: an execution outlived its lock; critical when another owner took it."""
    found = []
    for row in _rows(_forensics("lock_overruns")(store)):
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
            Alert(
                id=alert_id(rule.name, *parts),
                rule=rule.name,
                severity=severity,
                summary=summary,
                key=_value(row, "key"),
                job_type=_value(row, "job_type"),
                job_id=_value(row, "job_id"),
                delivery_attempt=attempt,
                lock_key=_value(row, "lock_key"),
                lock_owner=_value(row, "lock_owner"),
                expired_at=_time(_value(row, "expired_at")),
                execution_end=end,
                overrun_ms=None if overrun is None else float(overrun),
                overlapped_by=other,
                incident_ts=end,
                evidence=_evidence(row),
            )
        )
    return found


def harmful_duplicate(store: Store, rule: Rule) -> list[Alert]:
    """A key whose side effect ran more than once: the duplicate the business feels."""
    found = []
    for row in _rows(_forensics("duplicates")(store)):
        effects = _value(row, "side_effects") or 0
        if not _value(row, "harmful") or effects < rule.get("min_side_effects", 2):
            continue
        key = _value(row, "key")
        found.append(
            Alert(
                id=alert_id(rule.name, key),
                rule=rule.name,
                severity=rule.severity,
                summary=(
                    f"key {key} ran its side effect {effects} times in "
                    f"{_value(row, 'executions')} executions (cause: {_value(row, 'cause')})"
                ),
                key=key,
                job_type=_value(row, "job_type"),
                incident_ts=_time(_value(row, "last_ts")),
                evidence=_evidence(row),
            )
        )
    return found


def stale_owner_write(store: Store, rule: Rule) -> list[Alert]:
    """A write by a worker whose lock had already passed to another owner."""
    found = []
    for row in _rows(_forensics("stale_owner_writes")(store)):
        parts = [
            row.get(k)
            for k in ("job_id", "delivery_attempt", "lock_key", "lock_owner", "event_uid")
        ]
        when = _time(_value(row, "ts") or _value(row, "write_ts"))
        found.append(
            Alert(
                id=alert_id(rule.name, *parts),
                rule=rule.name,
                severity=rule.severity,
                summary=(
                    f"{_value(row, 'lock_owner')} wrote for job {_value(row, 'job_id')} after "
                    f"lock {_value(row, 'lock_key')} passed to "
                    f"{_value(row, 'current_owner') or _value(row, 'overlapped_by')}"
                ),
                key=_value(row, "key"),
                job_type=_value(row, "job_type"),
                job_id=_value(row, "job_id"),
                delivery_attempt=_int(_value(row, "delivery_attempt")),
                lock_key=_value(row, "lock_key"),
                lock_owner=_value(row, "lock_owner"),
                overlapped_by=_value(row, "current_owner") or _value(row, "overlapped_by"),
                incident_ts=when,
                evidence=_evidence(row),
            )
        )
    return found


def split_brain(store: Store, rule: Rule) -> list[Alert]:
    """Two owners holding unexpired locks on one lock_key at once: one alert per pair."""
    found: dict[str, Alert] = {}
    for row in _rows(_forensics("split_brains")(store)):
        owner = _value(row, "lock_owner")
        other = _value(row, "other_owner") or _value(row, "overlapped_by")
        jobs = sorted(str(_value(row, k) or "") for k in ("job_id", "other_job_id"))
        pair = sorted([str(owner or ""), str(other or "")])
        ident = alert_id(rule.name, _value(row, "lock_key"), *pair, *jobs)
        if ident in found:  # the same overlap reported from each side
            continue
        found[ident] = Alert(
            id=ident,
            rule=rule.name,
            severity=rule.severity,
            summary=f"{owner} and {other} both held lock {_value(row, 'lock_key')}",
            key=_value(row, "key"),
            job_type=_value(row, "job_type"),
            job_id=_value(row, "job_id"),
            delivery_attempt=_int(_value(row, "delivery_attempt")),
            lock_key=_value(row, "lock_key"),
            lock_owner=owner,
            overlapped_by=other,
            incident_ts=_time(
                _value(row, "until") or _value(row, "overlap_end") or _value(row, "last_ts")
            ),
            evidence=_evidence(row),
        )
    return list(found.values())


def _near_setting(setting: str, label: str) -> Detector:
    def detect(store: Store, rule: Rule) -> list[Alert]:
        found = []
        share = float(rule.get("share", 0.8))
        for row in _rows(_forensics("durations")(store)):
            p99 = _value(row, "p99_ms")
            limit = _value(row, setting)
            count = _value(row, "executions") or 0
            if p99 is None or not limit or count < rule.get("min_executions", 0):
                continue
            if p99 < share * limit:
                continue
            job_type = _value(row, "job_type")
            found.append(
                Alert(
                    # A changed setting is a new situation, so it is part of the identity.
                    id=alert_id(rule.name, job_type, int(limit)),
                    rule=rule.name,
                    severity=rule.severity,
                    summary=(
                        f"{job_type}: p99 {p99:.0f} ms is {p99 / limit:.0%} of the "
                        f"{label} ({int(limit)} ms)"
                    ),
                    job_type=job_type,
                    evidence=_evidence(row),
                )
            )
        return found

    return detect


def redelivery_storm(store: Store, rule: Rule) -> list[Alert]:
    """Many redeliveries of one job type in a tumbling window of event time."""
    from queries.loader import run

    window = int(rule.get("window_seconds", 300))
    frame = run(
        store,
        "alert_redeliveries",
        window_s=window,
        min_count=int(rule.get("min_redeliveries", 20)),
    )
    found = []
    for row in _rows(frame):
        job_type = _value(row, "job_type")
        bucket = int(row["bucket"])
        found.append(
            Alert(
                id=alert_id(rule.name, job_type, window, bucket),
                rule=rule.name,
                severity=rule.severity,
                summary=(
                    f"{job_type}: {row['redeliveries']} redeliveries of {row['jobs']} jobs "
                    f"within {window} s"
                ),
                job_type=job_type,
                incident_ts=_time(_value(row, "last_ts")),
                evidence=_evidence(row),
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
