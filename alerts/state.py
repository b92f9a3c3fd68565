"""The alert state beside a store: which kind (alerts/state_base.py says what it keeps).

Kept apart from the kinds' shared model so that each kind imports the model and this
module imports the kinds, one way.
"""

from __future__ import annotations

from alerts.state_base import HISTORY_COLUMNS, AlertState, Delivery
from alerts.state_clickhouse import TableState
from alerts.state_sqlite import SqliteState
from store.base import Store

__all__ = ["HISTORY_COLUMNS", "AlertState", "Delivery", "open_state"]


def open_state(store: Store) -> AlertState:
    """The state beside the events: a file under an embedded store's folder, tables in
    ClickHouse or chDB."""
    segmented = store.segmented()
    if segmented is not None:
        return SqliteState(segmented.root / "alerts" / "state.sqlite3")
    return TableState(store)
