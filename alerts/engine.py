"""One evaluation: every enabled rule over the store, optionally limited to a time window.

Shared by `dupescope alerts` (one evaluation, nothing recorded) and `dupescope watch`
(which records what it finds and delivers what is new). A rule that fails is logged and
skipped, so one broken query cannot silence the other rules.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import pandas as pd

from alerts.detectors import DETECTORS
from alerts.model import COLUMNS, Alert
from alerts.rules import Rule
from store.base import Store

log = logging.getLogger("dupescope.alerts")

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def evaluate(
    store: Store,
    rules: dict[str, Rule],
    *,
    incidents_since: datetime | None = None,
    **filters: Any,
) -> list[Alert]:
    """Incidents of every enabled rule.

    With `incidents_since` (the watch window), only incidents whose event time is at or
    after it; incidents without an event time (per-job-type rules) always count.
    `filters` (job_type, queue, since/until on execution start) go to the forensic
    queries as they are.
    """
    found: list[Alert] = []
    for name, rule in rules.items():
        if not rule.enabled:
            continue
        detector = DETECTORS.get(name)
        if detector is None:
            log.warning("rule %s has no detector; skipped", name)
            continue
        try:
            alerts = detector(store, rule, **filters)
        except Exception:
            log.exception("rule %s failed on %s; skipped this round", name, store.describe())
            continue
        found.extend(a for a in alerts if incidents_since is None or _in_window(a, incidents_since))
    found.sort(key=lambda a: (_SEVERITY_ORDER.get(a.severity, 9), a.rule, a.id))
    return found


def _in_window(alert: Alert, since: datetime) -> bool:
    return alert.incident_ts is None or alert.incident_ts >= since


def to_frame(alerts: list[Alert]) -> pd.DataFrame:
    """Rows with the `dupescope alerts` contract columns first."""
    return pd.DataFrame([a.row() for a in alerts], columns=list(COLUMNS))
