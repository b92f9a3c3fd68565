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
from queries.derived import Touched, only
from store.base import Store

log = logging.getLogger("dupescope.alerts")

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}

#: Rules whose every incident belongs to one key or one lock_key: a batch can only raise
#: theirs among the keys it touched (and the holders of their lock_keys). The rest judge
#: a job type's whole history (duration percentiles, redeliveries per window).
PER_UNIT = frozenset({
    "lock_expired_while_running", "harmful_duplicate", "stale_owner_write", "split_brain",
})


def evaluate(
    store: Store,
    rules: dict[str, Rule],
    *,
    incidents_since: datetime | None = None,
    touched: Touched | None = None,
    **filters: Any,
) -> list[Alert]:
    """Incidents of every enabled rule.

    With `incidents_since` (the watch window), only incidents whose event time is at or
    after it; incidents without an event time (per-job-type rules) always count.
    With `touched` (what batches changed since the last evaluation), the rules whose
    incidents belong to one key or one lock_key (`PER_UNIT`) look at those alone: an
    incident of anything else was there, and found, before.
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
            if touched is not None and name in PER_UNIT:
                with only(store, touched):
                    alerts = detector(store, rule, **filters)
            else:
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
