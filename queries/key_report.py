"""What the incident report of one key holds: the timeline page's forensics (verdict,
cause, executions), the key's side effects, its locks judged against how long each run
held them, the settings that would have prevented it (the what-if replay over the key's
own runs), and the keys it shares a job_id, lock_key or resource_key with.

Data only; dashboard/report.py renders it as Markdown or HTML, for the command line and the
dashboard's download button alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from queries.derived import query
from queries.duplicates_table import filters as bound_filters
from queries.key_forensics import KeyForensics, key_forensics
from queries.whatif import Settings, replay
from store.base import Store

#: At most this many related keys are listed.
RELATED_LIMIT = 50


@dataclass(frozen=True)
class Prevention:
    """One setting tried on the key's runs, and what the replay says would have been."""

    setting: str
    settings: Settings
    outcome: str
    prevents: bool


@dataclass(frozen=True)
class KeyReport:
    key: str
    forensics: KeyForensics
    side_effects: pd.DataFrame
    locks: pd.DataFrame
    preventions: list[Prevention]
    related: pd.DataFrame


def key_report(store: Store, key: str) -> KeyReport:
    """Everything the report of `key` (an idempotency key or job_id) shows."""
    forensics = key_forensics(store, key)
    name = str(forensics.duplicate["key"]) if forensics.duplicate else key
    timeline = forensics.timeline
    if timeline.empty:
        effects = pd.DataFrame(columns=["ts", "execution", "worker_id", "event"])
    else:
        effects = timeline[timeline["event"] == "side_effect"][
            ["ts", "execution", "worker_id", "event"]].reset_index(drop=True)
    return KeyReport(
        key=key,
        forensics=forensics,
        side_effects=effects,
        locks=lock_validity(forensics.executions),
        preventions=preventions(store, name, forensics),
        related=query(store, "report_related_keys", key=name, limit=RELATED_LIMIT),
    )


def lock_validity(executions: pd.DataFrame) -> pd.DataFrame:
    """Per execution that held a lock: its grant's end against the run's end."""
    held = executions[executions["lock_key"].notna()] if not executions.empty else executions
    rows = []
    for run in held.to_dict(orient="records"):
        valid = run["lock_valid_until"]
        end = run["end"]
        lapsed = valid is not None and not pd.isna(valid) and valid < end
        rows.append({
            "execution": run["execution"],
            "lock_key": run["lock_key"],
            "lock_owner": run["lock_owner"],
            "valid_until": valid,
            "run_end": end,
            "duration_ms": run["duration_ms"],
            "verdict": (f"expired {(end - valid).total_seconds():.1f} s before the run ended"
                        if lapsed else "valid for the whole run"),
        })
    return pd.DataFrame(rows, columns=["execution", "lock_key", "lock_owner", "valid_until",
                                       "run_end", "duration_ms", "verdict"])


def _seconds_above(ms: float) -> int:
    """A limit in ms comfortably above `ms`: the next whole 5 s past it."""
    return int((math.floor(ms / 5_000) + 1) * 5_000)


def preventions(store: Store, key: str, forensics: KeyForensics) -> list[Prevention]:
    """Settings tried on the key's own runs: a visibility timeout its earlier runs fit,
    a lock TTL its holders' runs fit, and a heartbeat; each with the replay's outcome."""
    if forensics.duplicate is None:
        return []
    runs = query(store, "whatif_runs", **bound_filters(), key=key)
    keys = query(store, "duplicates", **bound_filters())
    keys = keys[keys["key"] == key]
    if runs.empty or keys.empty:
        return []
    durations = (runs["end_us"].astype("float64") - runs["start_us"].astype("float64")) / 1000
    holds = (runs["end_us"].astype("float64")
             - runs["lock_acquired_us"].astype("float64")) / 1000
    candidates: list[tuple[str, Settings]] = []
    vt = runs["visibility_timeout_ms"].dropna()
    if not vt.empty:
        needed = _seconds_above(float(durations.max()))
        if needed > float(vt.max()):
            candidates.append((f"visibility timeout {needed // 1000} s",
                               Settings(visibility_timeout_ms=needed)))
    ttl = runs["lock_ttl_ms"].dropna()
    if not ttl.empty and holds.notna().any():
        needed = _seconds_above(float(holds.max()))
        if needed > float(ttl.max()):
            candidates.append((f"lock TTL {needed // 1000} s", Settings(lock_ttl_ms=needed)))
    limits = [float(v) for v in (*vt.tolist(), *ttl.tolist())]
    if limits:
        beat = max(int(min(limits) // 3), 1)
        candidates.append((f"heartbeat every {beat / 1000:.1f} s (renew the lock, extend "
                           "visibility)", Settings(heartbeat_ms=beat)))
    found = []
    for label, settings in candidates:
        answer = replay(runs, keys, settings)
        changed = answer.keys
        if changed.empty:
            found.append(Prevention(label, settings, "would not have changed it", False))
        else:
            found.append(Prevention(label, settings, str(changed.iloc[0]["change"]), True))
    return found
