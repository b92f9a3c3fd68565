"""One row per execution of a key, read off its timeline: what each run did and how it ended.

The verdict (queries/verdict.py), the dashboard's swimlane chart and `dupescope timeline`
all talk about executions ("the first worker went silent after its side effect"), so they
share this summary of the key's timeline (queries/timeline.py) rather than each reading
the events again.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pandas as pd

#: Events that settle a delivery; the last one is how the execution ended.
SETTLED = ("ack", "nack", "fail")
#: Events by which an extra execution avoided repeating the effect.
ABSORBING = ("idempotency_hit", "lock_contended", "occ_conflict")
#: Events by which a run said what became of its effect (the contract's evidence of harm
#: or of its absence); a key none of whose runs sent one has an unknown outcome.
EFFECT_EVIDENCE = ("side_effect", *ABSORBING, "commit")
COLUMNS = [
    "execution",
    "job_id",
    "worker_id",
    "delivery_attempt",
    "start",
    "end",
    "duration_ms",
    "side_effect",
    "absorbed_by",
    "outcome",
    "reason",
    "settled_by",
    "visibility_timeout_ms",
    "lock_key",
    "lock_owner",
    "lock_valid_until",
    "effect_reported",
]


def attrs_of(value: Any) -> dict[str, Any]:
    """The attrs JSON of a row as a dict (empty when missing or not an object)."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _first(series: pd.Series) -> Any:
    present = series.dropna()
    return present.iloc[0] if not present.empty else None


def _lock_valid_until(rows: pd.DataFrame) -> pd.Timestamp | None:
    grants = rows[rows["event"].isin(["lock_acquire", "lock_renew"]) & rows["lock_ttl_ms"].notna()]
    if grants.empty:
        return None
    last = grants.iloc[-1]
    valid: pd.Timestamp = last["ts"] + pd.to_timedelta(int(last["lock_ttl_ms"]), unit="ms")
    return valid


def summarise(timeline: pd.DataFrame) -> pd.DataFrame:
    """Executions of a timeline (the frame of `queries.timeline`), in the order they started.

    Columns (COLUMNS): execution (the timeline's number), job_id, worker_id,
    delivery_attempt, start, end, duration_ms, side_effect (it ran the effect),
    absorbed_by (the event by which it avoided the effect, if any), outcome (its last
    ack/nack/fail, else `silent`), reason and settled_by (from that event's attrs),
    visibility_timeout_ms (of its deliver), lock_key, lock_owner, lock_valid_until (its
    last grant plus TTL), effect_reported (it sent an event of EFFECT_EVIDENCE).
    """
    if timeline.empty or "execution" not in timeline:
        return pd.DataFrame(columns=COLUMNS)
    runs = timeline[timeline["execution"].notna()].sort_values(["ts"], kind="stable")
    rows = []
    for number, group in runs.groupby("execution", sort=True):
        events = group["event"].tolist()
        settled = group[group["event"].isin(SETTLED)]
        last_settle = settled.iloc[-1] if not settled.empty else None
        details = attrs_of(last_settle["attrs"]) if last_settle is not None else {}
        delivers = group[group["event"] == "deliver"]
        start, end = group["ts"].min(), group["ts"].max()
        rows.append(
            {
                "execution": int(cast(int, number)),
                "job_id": _first(group["job_id"]),
                "worker_id": _first(group["worker_id"]),
                "delivery_attempt": _first(group["delivery_attempt"]),
                "start": start,
                "end": end,
                "duration_ms": (end - start).total_seconds() * 1000,
                "side_effect": "side_effect" in events,
                "absorbed_by": next((e for e in events if e in ABSORBING), None),
                "outcome": last_settle["event"] if last_settle is not None else "silent",
                "reason": details.get("reason"),
                "settled_by": details.get("settled_by"),
                "visibility_timeout_ms": _first(delivers["visibility_timeout_ms"]),
                "lock_key": _first(group["lock_key"]),
                "lock_owner": _first(group["lock_owner"]),
                "lock_valid_until": _lock_valid_until(group),
                "effect_reported": any(e in EFFECT_EVIDENCE for e in events),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def overlaps(executions: pd.DataFrame) -> list[tuple[pd.Timestamp, pd.Timestamp, int, int]]:
    """Spans where two executions ran at once: (from, to, first execution, second)."""
    found = []
    ordered = executions.sort_values("start").to_dict(orient="records")
    for i, one in enumerate(ordered):
        for other in ordered[i + 1 :]:
            begin, finish = max(one["start"], other["start"]), min(one["end"], other["end"])
            if begin < finish:
                found.append((begin, finish, one["execution"], other["execution"]))
    return found
