"""One alert, found by its id, and the keys it names: what an incident report covers."""

from __future__ import annotations

from typing import Any

from store.base import Store


def find_alert(store: Store, alert_id: str) -> dict[str, Any] | None:
    """The alert `watch` recorded under `alert_id`, else the one the rules find now (an id
    depends only on the rule and the incident, so the two agree)."""
    from alerts.engine import evaluate
    from alerts.model import document
    from alerts.rules import load_rules
    from alerts.state import open_state

    state = open_state(store)
    try:
        history = state.history(limit=1_000_000)
    finally:
        state.close()
    hits = history[history["alert_id"] == alert_id]
    if not hits.empty:
        return {str(k): v for k, v in hits.iloc[0].to_dict().items()}
    for alert in evaluate(store, load_rules(None)):
        if alert.id == alert_id:
            return document(alert)
    return None


def named_keys(store: Store, alert: dict[str, Any]) -> list[str]:
    """The keys an alert names: its own, and the key of the owner that took its lock."""
    import queries

    keys = [alert.get("key")]
    owner = alert.get("overlapped_by")
    if owner:
        found = queries.key_suggestions(store, str(owner), 20)
        exact = found[(found["kind"] == "lock_owner") & (found["value"] == owner)]
        keys += exact["key"].tolist()
    return [str(k) for k in dict.fromkeys(keys) if k]
