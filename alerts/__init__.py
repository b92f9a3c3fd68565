"""Alerting: rules over the forensic queries, fired once per incident, delivered durably.

`evaluate` answers "what is wrong now" (`dupescope alerts`); `Watcher` keeps doing so as
data arrives, records each incident once under a stable id and owes its delivery in an
outbox (`dupescope watch`); `history` is what the dashboard shows.
"""

from __future__ import annotations

import pandas as pd

from alerts.engine import evaluate, to_frame
from alerts.ids import alert_id
from alerts.model import Alert
from alerts.rules import Rule, RulesError, load_rules
from alerts.state import HISTORY_COLUMNS, open_state
from store.base import Store


def history(store: Store, limit: int = 200) -> pd.DataFrame:
    """Alerts fired on `store`, newest first, with how their deliveries went.

    Read-only for the embedded store (the dashboard may run beside `watch`); an empty
    frame with the same columns when nothing was ever fired.
    """
    segmented = store.segmented()
    if segmented is not None:
        path = segmented.root / "alerts" / "state.sqlite3"
        if not path.exists():
            return pd.DataFrame(columns=list(HISTORY_COLUMNS))
        from alerts.state_sqlite import SqliteState

        state = SqliteState(path, readonly=True)
    else:
        state = open_state(store)
    try:
        return state.history(limit)
    finally:
        state.close()


__all__ = [
    "Alert",
    "Rule",
    "RulesError",
    "alert_id",
    "evaluate",
    "history",
    "load_rules",
    "to_frame",
]
